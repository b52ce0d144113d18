#pragma once
// Filler text ("haystack") for long-context tasks: sentences and insertion of facts at chosen depths.
#include <string>
#include <vector>

namespace kvc {

// The files' contents in order, joined by blank lines; throws kvc::Error naming a missing file.
std::string load_haystack(const std::vector<std::string>& paths);

// Sentences of `text`, each with the whitespace that follows it, so that they join back into the text
// (minus leading whitespace). A sentence ends at '.', '!' or '?' (closing quotes and brackets included)
// followed by whitespace, except after common abbreviations and initials, or at a blank line.
std::vector<std::string> split_sentences(const std::string& text);

// RULER's noise: "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back
// again." as five sentences.
const std::vector<std::string>& noise_sentences();

// split_sentences(haystack), or noise_sentences() when the haystack is empty. Throws kvc::Error when a
// non-empty haystack holds no sentence.
std::vector<std::string> filler_sentences(const std::string& haystack);

struct Insertion {
  double depth;      // 0 = before the first filler sentence, 1 = after the last
  std::string text;  // a sentence; it is followed by a space
};

struct AssembledText {
  std::string text;
  std::vector<size_t> offsets;  // byte offset of each insertion in `text`, in the order given
};

// `count` filler sentences, cycling through `sentences`, with each insertion at the sentence boundary
// nearest to its depth (measured in characters of filler). Insertions at one boundary keep their order;
// trailing whitespace is trimmed.
AssembledText assemble_haystack(const std::vector<std::string>& sentences, size_t count,
                                const std::vector<Insertion>& insertions);

}  // namespace kvc
