#include "tasks/word_lists.h"

#include <sstream>

namespace kvc {

namespace {

std::vector<std::string> words_of(const char* text) {
  std::istringstream in(text);
  std::vector<std::string> words;
  for (std::string word; in >> word;) words.push_back(word);
  return words;
}

}  // namespace

const std::vector<std::string>& english_adjectives() {
  static const std::vector<std::string> words = words_of(
      "amber ancient angry bitter blazing bold brave bright broken calm careful cheerful clever cold crimson "
      "curious dusty eager elegant empty fancy fierce frozen gentle giant golden graceful hidden hollow humble "
      "icy jolly lively lonely lucky marble mighty misty modest noble purple quiet rapid royal rusty scarlet "
      "silent silver sleepy smooth solemn spotted steady stormy sturdy swift tender tiny velvet violet "
      "wandering wicked wise wooden yellow");
  return words;
}

const std::vector<std::string>& english_nouns() {
  static const std::vector<std::string> words = words_of(
      "anchor apple arrow badger banner barrel basket beacon bell blanket bottle bridge bucket cabin camel "
      "candle canyon carpet castle cellar chapel cherry chimney church cliff clock cloud comet compass cottage "
      "crown crystal dagger desert diamond dolphin dragon drum eagle engine falcon feather ferry fiddle flute "
      "forest fountain galaxy garden glacier goblet harbor harp hammer helmet island jacket jungle kettle "
      "kingdom ladder lantern lemon library lighthouse lizard locket magnet meadow mirror monkey mountain "
      "needle oasis orchard otter palace parrot pebble pencil pepper piano pigeon pillow planet pocket puzzle "
      "pyramid quarry rabbit raven ribbon river rocket saddle sailor scroll ship shovel spider statue stone "
      "temple thimble tiger tower trumpet tunnel turtle umbrella valley violin volcano wagon walrus whistle "
      "window wizard");
  return words;
}

std::vector<std::string> adjective_noun_pairs(const std::string& separator) {
  std::vector<std::string> pairs;
  for (const auto& adjective : english_adjectives()) {
    for (const auto& noun : english_nouns()) pairs.push_back(adjective + separator + noun);
  }
  return pairs;
}

}  // namespace kvc
