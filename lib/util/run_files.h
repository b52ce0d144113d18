#pragma once
// The files one run reads and the files it will write, so that an output never lands on an input
// (`-o model.safetensors`, `--json-out model/config.json`) or on another output of the same run
// (`--store X --index X`). Inputs are noted when they are opened or named on the command line;
// outputs are claimed before the long work starts. Files are compared by device and inode (so links
// and different spellings of one path match); outputs that do not exist yet by their absolute path.
#include <string>

namespace kvc {

// Notes `path` (after symlinks) as read by this run; `role` names it in errors ("the model", "--bases").
// A path that does not exist or is not a regular file is ignored: the reader reports it.
void note_input_file(const std::string& path, const std::string& role = "an input of this run");

// Notes the files a model folder or GGUF file consists of (weights, config, tokenizer, chat template).
void note_model_files(const std::string& model_path);

// A file mapped for reading is an input while it is mapped (MappedFile notes and releases it): a write
// in place would change, or truncate under, the memory the run is reading.
void note_mapped_input(const std::string& path, unsigned long device, unsigned long inode);
void release_mapped_input(unsigned long device, unsigned long inode);

// Throws kvc::Error unless writing `path` leaves every noted input as it is.
void check_output_is_not_an_input(const std::string& path);

// check_output_is_not_an_input, and refuses a path already claimed by another output of this run.
// Pipes, devices and "-" are written through, never replaced, and may be named by several outputs.
void claim_output(const std::string& path);

// claim_output, then check_writable_output (util/files.h): what a tool calls for each output path
// before its long work.
void claim_writable_output(const std::string& path);

// Forgets every note (tests run several tools' worth of work in one process).
void forget_run_files();

}  // namespace kvc
