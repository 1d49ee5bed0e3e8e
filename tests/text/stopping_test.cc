// StopChecker: EOS ids, stop strings spanning tokens, max_new_tokens, and the text withheld meanwhile.
#include <gtest/gtest.h>

#include "ferry/core/error.h"
#include "ferry/text/stopping.h"

namespace ferry::text {
namespace {

TEST(StopChecker, MaxNewTokensReleasesEverything) {
  StopChecker stop({.stop_strings = {"###"}, .max_new_tokens = 3});
  EXPECT_EQ(stop.push(1, "a").text, "a");
  EXPECT_EQ(stop.push(2, "#").text, "");  // might begin "###"
  const auto last = stop.push(3, "b");
  EXPECT_EQ(last.reason, StopReason::MaxNewTokens);
  EXPECT_EQ(last.text, "#b");
  EXPECT_TRUE(stop.stopped());
  EXPECT_EQ(stop.generated_tokens(), 3u);
  EXPECT_THROW(stop.push(4, "x"), Error);
}

TEST(StopChecker, EosEndsWithoutShowingItsText) {
  StopChecker stop({.eos_token_ids = {2, 7}, .stop_strings = {"END"}});
  EXPECT_EQ(stop.push(5, "Hi E").text, "Hi ");
  const auto s = stop.push(7, "</s>");
  EXPECT_EQ(s.reason, StopReason::EosToken);
  EXPECT_EQ(s.text, "E");  // the withheld text, not the EOS token's
  EXPECT_STREQ(to_string(stop.reason()), "eos_token");
}

TEST(StopChecker, StopStringsSpanningTokensAreCut) {
  StopChecker stop({.stop_strings = {"\nUser:"}});
  EXPECT_EQ(stop.push(1, "Hello").text, "Hello");
  EXPECT_EQ(stop.push(2, "!\nUs").text, "!");
  const auto s = stop.push(3, "er: more");
  EXPECT_EQ(s.reason, StopReason::StopString);
  EXPECT_EQ(s.text, "");
  EXPECT_EQ(stop.matched_stop_string(), "\nUser:");
}

TEST(StopChecker, WithheldTextIsReleasedOnceItCannotMatch) {
  StopChecker stop({.stop_strings = {"\nUser:", "STOP"}});
  EXPECT_EQ(stop.push(1, "a\nU").text, "a");
  EXPECT_EQ(stop.push(2, "nder").text, "\nUnder");
  EXPECT_EQ(stop.push(3, "ST").text, "");
  EXPECT_EQ(stop.push(4, "ay").text, "STay");
}

TEST(StopChecker, EarliestStopStringWins) {
  StopChecker stop({.stop_strings = {"b", "a"}});
  const auto s = stop.push(1, "xxab");
  EXPECT_EQ(s.reason, StopReason::StopString);
  EXPECT_EQ(s.text, "xx");
  EXPECT_EQ(stop.matched_stop_string(), "a");
}

TEST(StopChecker, DegenerateCriteria) {
  EXPECT_THROW(StopChecker({.stop_strings = {""}}), Error);
  StopChecker none({.max_new_tokens = 0});
  EXPECT_TRUE(none.stopped());
  EXPECT_EQ(none.reason(), StopReason::MaxNewTokens);
}

}  // namespace
}  // namespace ferry::text
