#pragma once
// Pieces shared by the RULER task generators (internal to lib/tasks).
#include <cstdint>
#include <string>
#include <vector>

#include "tasks/ruler_tasks.h"
#include "tasks/task_random.h"

namespace kvc {

// RULER's noise haystack: one unit is all five sentences.
inline const char* const kRulerNoise =
    "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.";

// A prompt template cut where kvc splits it: head + data = context; tail = question; then answer_prefix.
struct RulerPrompt {
  std::string head, tail, answer_prefix;
};

// id "<task>-<tokens>tok-seed<seed>" and RULER's metric for the task.
TaskSample ruler_sample(const std::string& task, const RulerRequest& request, const RulerPrompt& prompt,
                        const std::string& context_data);

// RULER's DEPTHS: np.round(np.linspace(0, 100, 40)) as integers.
const std::vector<int>& ruler_depths();

// k distinct indices of [0, n) in the order drawn (Python's random.sample(range(n), k)); k <= n.
std::vector<size_t> sample_indices(TaskRng& rng, size_t n, size_t k);

// uuid.UUID(int=random.getrandbits(128), version=4): lower-case 8-4-4-4-12 hex with the version and
// variant bits set.
std::string random_uuid(TaskRng& rng);

std::string replace_all(std::string text, const std::string& from, const std::string& to);

// The essay haystack as RULER keeps it: the text's words (runs of whitespace collapsed).
std::vector<std::string> essay_words(const std::string& essay);

// RULER's essay context: the first `count` words (repeated when the essay is shorter), cut into
// sentences, with insertion i placed before sentence int(sentences * depths[i] / 100) (depths sorted
// ascending, insertions in that order); all pieces, empty ones included, joined by single spaces.
std::string essay_with_insertions(const std::vector<std::string>& words, size_t count, const std::vector<int>& depths,
                                  const std::vector<std::string>& insertions);

}  // namespace kvc
