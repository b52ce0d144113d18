#pragma once
// SentencePiece tokenizer, reached through libkvc_spm.so opened with dlopen(RTLD_DEEPBIND).
#include <memory>
#include <string>
#include <vector>

namespace kvc {

class Tokenizer {
 public:
  // Loads `tokenizer.model`; throws kvc::Error if the file is missing or not a SentencePiece model.
  static Tokenizer load(const std::string& model_path);
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  std::vector<int> encode(const std::string& text) const;
  std::string decode(const std::vector<int>& ids) const;
  std::string piece(int id) const;
  int vocab_size() const;

 private:
  struct Impl;
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Streaming detokenizer: feed ids one at a time, get the text that became final.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer) : tokenizer_(tokenizer) {}
  // Text already shown (the prompt): without it the first piece would lose its leading space.
  void prime(const std::vector<int>& shown_ids);
  std::string push(int id);

 private:
  const Tokenizer& tokenizer_;
  std::vector<int> context_;  // recently emitted ids
  std::vector<int> pending_;  // ids whose text is not yet complete
};

}  // namespace kvc
