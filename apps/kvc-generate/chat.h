#pragma once
// kvc-generate --chat: a conversation through the model's chat template, one cache (and any compression
// on it) kept across the turns.
#include <CLI/CLI.hpp>

#include "flag_vocabulary.h"
#include "generate_options.h"

namespace kvc::generate_app {

// --chat, --system, --chat-template.
void add_chat_flags(CLI::App& app, GenerateOptions& o);
// The spellings llama.cpp users type: -cnv for --chat, -sys for --system.
cli::AliasList chat_aliases();
int run_chat(const GenerateOptions& o);

}  // namespace kvc::generate_app
