// kvc-tokenize: text -> token ids and back with a model's tokenizer (SentencePiece or byte-level BPE),
// as llama.cpp's llama-tokenize does.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <string>

#include "token_ids.h"
#include "tokenizer/tokenizer.h"
#include "tool_main.h"
#include "util/files.h"

namespace {

struct Options {
  std::string model, file, prompt;
  bool json = false, decode = false, no_bos = false, bench = false, info = false;
  int bench_passes = 3;
};

std::string read_input(const Options& o, CLI::App& app) {
  if (app.count("--prompt") > 0) return o.prompt;
  if (!o.file.empty() && o.file != "-") return kvc::read_text_file(o.file);
  return std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
}

// Encodes the text `passes` times: the first pass starts with an empty piece cache, as a fresh process does.
void bench(const kvc::Tokenizer& tokenizer, const std::string& text, const Options& o) {
  double first = 0, best = 0;
  size_t tokens = 0;
  for (int pass = 0; pass < o.bench_passes; ++pass) {
    const auto start = std::chrono::steady_clock::now();
    tokens = tokenizer.encode(text).size();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double mb_per_s = static_cast<double>(text.size()) / 1e6 / seconds;
    if (pass == 0) first = mb_per_s;
    best = std::max(best, mb_per_s);
  }
  const double mb = static_cast<double>(text.size()) / 1e6;
  if (o.json) {
    std::printf(
        "{\"bytes\": %zu, \"tokens\": %zu, \"first_pass_mb_per_s\": %.3f, \"best_mb_per_s\": %.3f, "
        "\"passes\": %d}\n",
        text.size(), tokens, first, best, o.bench_passes);
  } else {
    std::printf("%.3f MB, %zu tokens: %.2f MB/s first pass (empty cache), %.2f MB/s best of %d passes\n", mb, tokens,
                first, best, o.bench_passes);
  }
}

}  // namespace

int main(int argc, char** argv) {
  constexpr const char* kTool = "kvc-tokenize";
  CLI::App app{"Turn text into token ids (or ids back into text) with a model's tokenizer.", kTool};
  app.footer(R"(
MODEL is a model folder (tokenizer.json preferred over tokenizer.model), a tokenizer.json, a SentencePiece
tokenizer.model or a .gguf file. Without -p or -f the text is read from stdin. Ids are printed on one
line, separated by spaces, with the tokenizer's BOS (and EOS, where its rules add one) unless --no-bos.

Examples:
  kvc-tokenize -m data/models/stories260K -p "Once upon a time" --json
  kvc-tokenize -m data/models/stories260K --decode -p "1 403 407 261 378"
  kvc-tokenize -m data/tokenizers/llama3-style/tokenizer.json -p "Hello world, 12345!"
  kvc-tokenize -m data/tokenizers/qwen2-style/tokenizer.json -f data/text/tinystories/tinystories_excerpt_30k.txt --json
  kvc-tokenize -m data/tokenizers/llama3-style/tokenizer.json --bench -f data/text/wikitext2/wiki.test.raw
)");
  Options o;
  app.add_option("-m,--model", o.model, "Model folder, tokenizer.json, tokenizer.model or .gguf")->required();
  auto* prompt = app.add_option("-p,--prompt", o.prompt, "Text to tokenize (with --decode: ids such as \"1 2 3\")");
  auto* file = app.add_option("-f,--file", o.file, "File to tokenize (with --decode: a file of ids); - for stdin");
  prompt->excludes(file);
  app.add_flag("--json", o.json, "Print {\"ids\": [...]} (with --bench: the timings as JSON)");
  app.add_flag("--decode", o.decode, "Read token ids and print their text");
  app.add_flag("--no-bos", o.no_bos, "Only the text's tokens: no BOS/EOS from the tokenizer's rules");
  app.add_flag("--info", o.info, "Print the tokenizer's kind, vocabulary size and special ids as JSON");
  app.add_flag("--bench", o.bench, "Measure encoding speed (MB/s) on the text instead of printing ids");
  app.add_option("--bench-passes", o.bench_passes, "Encodings of the text that --bench times")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  if (int code = kvc::cli::parse_or_exit(app, argc, argv, kTool); code >= 0) return code;
  return kvc::cli::run_tool(kTool, [&] {
    const kvc::Tokenizer tokenizer = kvc::Tokenizer::load(o.model);
    if (o.info) {
      const auto bos = tokenizer.bos_id();
      std::printf("%s\n",
                  fmt::format("{{\"kind\": \"{}\", \"vocab_size\": {}, \"bos_id\": {}, \"eos_ids\": [{}], "
                              "\"special_ids_added\": [{}]}}",
                              tokenizer.kind(), tokenizer.vocab_size(), bos ? std::to_string(*bos) : "null",
                              fmt::join(tokenizer.eos_ids(), ", "), fmt::join(tokenizer.with_special_ids({}), ", "))
                      .c_str());
      return 0;
    }
    const std::string input = read_input(o, app);
    if (o.decode) {
      const std::string text = tokenizer.decode(kvc::cli::parse_token_ids(input));
      std::fwrite(text.data(), 1, text.size(), stdout);
      return 0;
    }
    if (o.bench) {
      bench(tokenizer, input, o);
      return 0;
    }
    std::vector<int> ids = tokenizer.encode(input);
    if (!o.no_bos) ids = tokenizer.with_special_ids(ids);
    const std::string line = o.json ? kvc::cli::format_ids_json(ids) : kvc::cli::format_ids_plain(ids);
    std::printf("%s\n", line.c_str());
    return 0;
  });
}
