// The cleaning rules of examples/bible/corpus_clean.h on lines taken from the
// real diatheke exports (shortened where marked).
#include <gtest/gtest.h>

#include "bible/corpus_clean.h"
#include "bible/wordnet.h"

using namespace t5x::bible;

TEST(BibleClean, GluedWordElementsGetASpace) {  // R3, engWEB2015eb Genesis 1:1
  auto v = parse_export_line(
      "Genesis 1:1: <w savlm=\"strong:H0430\">In</w> <w savlm=\"strong:H0853\">the</w> "
      "<w savlm=\"strong:H7225\">beginning</w>, <w savlm=\"strong:H0430\">God</w><w "
      "savlm=\"strong:H1254\">created</w> <w savlm=\"strong:H0853\">the</w> <w "
      "savlm=\"strong:H8064\">heavens</w> <w savlm=\"strong:H0430\">and</w> <w "
      "savlm=\"strong:H0853\">the</w> <w savlm=\"strong:H0776\">earth</w>.");
  ASSERT_TRUE(v);
  EXPECT_EQ(v->book, "Genesis");
  EXPECT_EQ(v->chapter, 1);
  EXPECT_EQ(v->verse, 1);
  EXPECT_EQ(v->text, "In the beginning, God created the heavens and the earth.");
}

TEST(BibleClean, NestedClosingTagsDoNotSplitAWord) {  // R3 must not fire on "</w></divineName>"
  EXPECT_EQ(clean_verse_markup("the <divineName><w savlm=\"strong:H3068\">LORD</w></divineName>’s house"),
            "the LORD’s house");
  EXPECT_EQ(clean_verse_markup("<w savlm=\"x\">These</w><transChange type=\"added\">are</transChange> the"),
            "These are the");
}

TEST(BibleClean, PilcrowsAndPreVerseHeadingsAreDropped) {  // R1, R5: engKJV2006eb Genesis 1:6 (shortened)
  auto v = parse_export_line(
      "Genesis 1:6: ¶ And <w savlm=\"strong:H0430\">God</w> <w savlm=\"strong:H0559\">said</w>, Let there be a "
      "<w savlm=\"strong:H7549\">firmament</w>.  <div eID=\"gen3\" type=\"x-p\"/>");
  ASSERT_TRUE(v);
  EXPECT_EQ(v->text, "And God said, Let there be a firmament.");
  // A Psalm superscription carried before the marker (engWEB2015eb Matthew 3:15, shortened).
  auto m = parse_export_line(
      "<title canonical=\"true\" type=\"psalm\">This Psalm is a genuine one of David.</title> <lg sID=\"g1\"/> "
      "<l level=\"1\" sID=\"g2\"/>Matthew 3:15: <w savlm=\"strong:G1161\">But</w> Jesus answered.");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->book, "Matthew");
  EXPECT_EQ(m->chapter, 3);
  EXPECT_EQ(m->verse, 15);
  EXPECT_EQ(m->text, "But Jesus answered.");
}

TEST(BibleClean, BookNamesWithNumeralsAndParentheses) {
  auto v = parse_export_line("I Samuel 3:10: Yahweh came.");
  ASSERT_TRUE(v);
  EXPECT_EQ(v->book, "I Samuel");
  auto g = parse_export_line("<l level=\"1\" sID=\"x\"/>Esther (Greek) 1:2: in those days");
  ASSERT_TRUE(g);
  EXPECT_EQ(g->book, "Esther (Greek)");
  EXPECT_EQ(g->text, "in those days");
  EXPECT_FALSE(parse_export_line("(engWEB2015eb)"));
}

TEST(BibleClean, NotesTitlesEntitiesAndSpaces) {  // R2, R6, R7
  EXPECT_EQ(clean_verse_markup("a <note type=\"x\">footnote text</note>b &amp; c , d<title>Heading</title> ."),
            "a b & c, d.");
  EXPECT_EQ(clean_verse_markup("  soul,<l eID=\"g1\" level=\"1\"/> <l level=\"2\" sID=\"g2\"/>“There  "), "soul, “There");
  EXPECT_EQ(clean_verse_markup(""), "");
}

TEST(BibleClean, BackMatterAfterTheLastBookIsDropped) {  // R8: engWEB2015eb Revelation 22:21 (shortened)
  EXPECT_EQ(clean_verse_markup("<w>saints</w>. Amen.  <chapter eID=\"Rev.22\"/><div eID=\"g6\" type=\"x-p\"/> "
                               "<div canonical=\"true\" eID=\"g5\" osisID=\"Rev\" type=\"book\"/> "
                               "<div sID=\"g7\" type=\"glossary\"/> Abaddon Abaddon is Hebrew for destruction."),
            "saints. Amen.");
  // A book's opening milestone (sID) is not its end.
  EXPECT_EQ(clean_verse_markup("<div osisID=\"Gen\" sID=\"g1\" type=\"book\"/>In the beginning"), "In the beginning");
}

TEST(BibleSplit, WholeBooksAndWords) {
  EXPECT_EQ(split_of_book("Ruth"), "test");
  EXPECT_EQ(split_of_book("Obadiah"), "validation");
  EXPECT_EQ(split_of_book("Genesis"), "train");
  // All senses of one word share a split; the split is a pure function.
  EXPECT_EQ(split_of_word("food"), split_of_word("food"));
  int train = 0;
  for (int i = 0; i < 1000; ++i) train += split_of_word("w" + std::to_string(i)) == "train";
  EXPECT_GT(train, 850);
  EXPECT_LT(train, 950);
}

TEST(WordNet, ParsesSynsetLines) {  // real lines of /usr/share/wordnet/data.verb and data.adj
  std::vector<Gloss> g;
  ASSERT_TRUE(parse_wordnet_data_line(
      "00001740 29 v 04 breathe 0 take_a_breath 0 respire 0 suspire 3 021 * 00005041 v 0000 | draw air into, "
      "and expel out of, the lungs; \"I can breathe better when the air is clean\"  ",
      g));
  ASSERT_EQ(g.size(), 4u);
  EXPECT_EQ(g[1].word, "take a breath");
  EXPECT_EQ(g[0].pos, "verb");
  EXPECT_EQ(g[3].definition, "draw air into, and expel out of, the lungs");
  g.clear();
  ASSERT_TRUE(parse_wordnet_data_line("00001740 00 a 01 able(a) 0 005 = 05200169 n 0000 | having the means", g));
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0].word, "able");
  EXPECT_EQ(g[0].pos, "adjective");
  g.clear();
  EXPECT_FALSE(parse_wordnet_data_line("  1 This software and database is being provided", g));
  EXPECT_THROW(parse_wordnet_data_line("00001740 29 v 04 breathe 0", g), std::runtime_error);
}
