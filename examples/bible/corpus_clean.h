// Cleaning the diatheke exports of the SWORD Bible modules into verse text.
//
// `diatheke -b MODULE -k Gen-Rev` prints one verse a line as
//   [pre-verse markup]Book C:V: <OSIS-ish markup around the verse text>
// and a last line "(MODULE)". The plain-text filter of diatheke glues words
// that sit in adjacent <w> elements ("Godcreated") and keeps KJV's pilcrows,
// so we clean the marked-up export ourselves. The rules, in order (each is
// tested in tests/examples/bible_test.cpp and listed in docs/data.md):
//  R1 Everything before the "Book C:V: " marker is dropped: it is pre-verse
//     material (section titles, Psalm superscriptions, and headings that
//     diatheke carries over from earlier verses).
//  R2 <title>, <note> and <milestone> elements are removed with their content
//     (headings and footnotes are not verse text).
//  R3 Adjacent elements with no white space between them ("</w><w") get one
//     space between them: the missing-space artefact.
//  R4 All other tags are removed, their text kept (<w>, <transChange>,
//     <divineName>, <q>, <seg>, <l>, <lg>, <div>, ...).
//  R5 Pilcrows (U+00B6) are removed.
//  R6 XML character entities are decoded.
//  R7 White space is collapsed to single spaces and trimmed; a space before
//     , ; : . ! ? is removed.
//  R8 Back matter after a book's closing milestone (<div eID=.. type="book"/>)
//     is dropped first: the WEB appends its glossary to Revelation 22:21.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace t5x::bible {

struct Verse {
  std::string book;     // as diatheke names it, e.g. "I Samuel", "Revelation of John"
  int chapter = 0;
  int verse = 0;
  std::string text;     // cleaned; may be empty (a verse the text lacks)
  std::string ref() const { return book + " " + std::to_string(chapter) + ":" + std::to_string(verse); }
};

// Finds the "Book C:V: " marker of one export line. Returns nullopt for lines
// without one (the trailing "(MODULE)" line).
std::optional<Verse> parse_export_line(const std::string& line);

// Applies rules R8 and R2-R7 to the verse body.
std::string clean_verse_markup(const std::string& body);

// The split of a canonical book: "train", "validation" or "test" (docs/data.md).
std::string split_of_book(const std::string& book);

}  // namespace t5x::bible
