// Tests of boilerplate removal and comment sections in the HTML extractor
// (core/extract).

#include "quarry/extract/html.hpp"

#include <doctest/doctest.h>

#include <string>

namespace extract_boilerplate_test {

namespace ce = quarry::extract;

namespace {

const std::string para = "<p>The council approved the new bridge on Tuesday, after a debate that "
                         "lasted most of the evening, and work is due to start in the spring.</p>";

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

} // namespace

TEST_CASE("extract_boilerplate drops boxes inside the article container") {
  auto html = "<html><head><meta name=\"author\" content=\"Jane Roe\"></head><body>"
              "<div id=\"onetrust-consent-sdk\"><p>We and our partners use cookies to "
              "personalise content, please accept them.</p></div>"
              "<article class=\"story\"><h1>Bridge approved</h1>"
              "<div class=\"byline\">By Jane Roe</div>"
              "<div class=\"share-bar\"><a href=\"#\">Facebook</a> <a href=\"#\">X</a>"
              "</div>"
              + para + para
              + "<figure><img src=\"a.jpg\"><figcaption>The old bridge."
                "<span class=\"image-credit\">Photo: Agency Name</span></figcaption>"
                "</figure>"
              + para
              + "<div class=\"newsletter-signup\"><p>Get our daily briefing in your "
                "inbox every morning, sign up now.</p></div>"
                "<div class=\"related-articles\"><h3>More news</h3><ul>"
                "<li><a href=\"/1\">Tunnel plan delayed again</a></li>"
                "<li><a href=\"/2\">Ferry fares to rise</a></li></ul></div>"
                "<p>Advertisement</p>"
              + para + "</article></body></html>";
  auto x = ce::extract_html(html);
  CHECK(has(x.text, "The council approved the new bridge"));
  CHECK(has(x.text, "The old bridge."));
  CHECK_FALSE(has(x.text, "cookies"));
  CHECK_FALSE(has(x.text, "By Jane Roe"));
  CHECK_FALSE(has(x.text, "Facebook"));
  CHECK_FALSE(has(x.text, "Agency Name"));
  CHECK_FALSE(has(x.text, "daily briefing"));
  CHECK_FALSE(has(x.text, "Tunnel plan"));
  CHECK_FALSE(has(x.text, "Advertisement"));
  CHECK(x.byline == "Jane Roe");
}

TEST_CASE("extract_boilerplate keeps comments apart") {
  auto html = "<html><body><article>" + para + para + para
              + "</article><section id=\"comments\"><h2>3 comments</h2>"
                "<ol class=\"comment-list\"><li class=\"comment\"><p>I drive "
                "over it every day and it is about time they fixed it.</p>"
                "<a class=\"comment-reply-link\" href=\"#\">Reply</a></li>"
                "<li class=\"comment\"><p>What about the cyclists, though? "
                "Nobody asked them.</p></li></ol>"
                "<form id=\"commentform\"><label>Name</label><input name=\"n\">"
                "<textarea></textarea></form></section></body></html>";
  auto x = ce::extract_html(html);
  CHECK(has(x.text, "The council approved"));
  CHECK_FALSE(has(x.text, "drive over it"));
  CHECK(has(x.comments, "I drive over it every day"));
  CHECK(has(x.comments, "What about the cyclists"));
  CHECK_FALSE(has(x.comments, "Reply"));
  CHECK_FALSE(has(x.comments, "Name"));
  CHECK_FALSE(has(x.comments, "council"));
}

TEST_CASE("extract_boilerplate: a page without comments has none") {
  auto x = ce::extract_html("<html><body><article>" + para + para + "</article></body></html>");
  CHECK(x.comments.empty());
}

TEST_CASE("extract_boilerplate does not drop prose under a misleading name") {
  // The id is made from the heading ("share"), the class of the frame says
  // "modal": the prose stays.
  std::string body;
  for (int i = 0; i < 6; ++i)
    body += para;
  auto x = ce::extract_html("<html><body><div class=\"app-modal-frame\">"
                            "<div id=\"sharing-with-a-team\" class=\"section\">"
                            "<h2>Sharing with a team</h2>"
                            + body + "</div></div></body></html>");
  CHECK(has(x.text, "Sharing with a team"));
  CHECK(has(x.text, "The council approved"));
}

TEST_CASE("extract_boilerplate drops hidden elements and navigation") {
  auto x = ce::extract_html("<html><body><article><nav><a href=\"/\">Home</a> <a href=\"/a\">World"
                            "</a></nav>"
                            + para + "<div style=\"display: none\">secret text</div>" + para
                            + "<div aria-hidden=\"true\">Share this</div>"
                            + "<div role=\"navigation\"><a href=\"/p\">Previous story</a></div>"
                            + para + "</article></body></html>");
  CHECK(has(x.text, "The council approved"));
  CHECK_FALSE(has(x.text, "Home"));
  CHECK_FALSE(has(x.text, "secret text"));
  CHECK_FALSE(has(x.text, "Share this"));
  CHECK_FALSE(has(x.text, "Previous story"));
}

TEST_CASE("extract_boilerplate: a no-break space at the edge of a link "
          "still parts the words") {
  auto x = ce::extract_html("<html><body><article>" + para + para
                            + "<p>In the examples above, my&nbsp;<a href=\"/dress\">favourite "
                              "dress</a>&nbsp;combines lace and a simple cut.</p>"
                            + para + "</article></body></html>");
  CHECK(has(x.text, "my favourite dress combines lace"));
}

TEST_CASE("extract_boilerplate keeps a list of the article that has some "
          "links, drops one made of links") {
  auto x = ce::extract_html("<html><body><article>" + para + para
                            + "<h4>My favourite spots by the water:</h4><ul>"
                              "<li>The <a href=\"/k\">Elbe canteen by the old harbour</a> in "
                              "Geesthacht</li>"
                              "<li>The jetties on the Dove Elbe</li>"
                              "<li>The dog beach at Stein (with a snack at <a href=\"/t\">Tatort "
                              "Hawaii</a> or a sunset at <a href=\"/m\">El Meson Playa</a>)</li>"
                              "<li>The Falkenstein shore</li></ul>"
                            + para
                            + "<ul><li><a href=\"/1\">Tunnel plan delayed again</a></li>"
                              "<li><a href=\"/2\">Ferry fares to rise</a></li>"
                              "<li><a href=\"/3\">New cycle lanes opened</a></li></ul>"
                            + para + "</article></body></html>");
  CHECK(has(x.text, "The jetties on the Dove Elbe"));
  CHECK(has(x.text, "The dog beach at Stein"));
  CHECK_FALSE(has(x.text, "Tunnel plan"));
  CHECK_FALSE(has(x.text, "Ferry fares"));
}

TEST_CASE("extract_boilerplate drops the label of a box of links it "
          "cleaned away, keeps a caption") {
  auto x = ce::extract_html("<html><body><article>" + para + para
                            + "<div class=\"box\"><div class=\"box-head\">Further reading</div>"
                              "<div class=\"box-body\"><a href=\"https://example.org/x\">Personal "
                              "leadership at work</a></div></div>"
                            + para
                            + "<div class=\"thumb\"><div class=\"caption\">Harbour at dawn"
                              "<div class=\"zoom\"><a href=\"/big.jpg\"></a></div></div></div>"
                            + para + "</article></body></html>");
  CHECK(has(x.text, "The council approved"));
  CHECK_FALSE(has(x.text, "Further reading"));
  CHECK_FALSE(has(x.text, "Personal leadership"));
  CHECK(has(x.text, "Harbour at dawn"));
}

TEST_CASE("extract_boilerplate drops the teasers of the next and previous "
          "posts") {
  auto x = ce::extract_html("<html><body><div id=\"story\">" + para + para + para
                            + "</div><div id=\"next-post-thumbnails\"><div class=\"nextstory\">"
                              "<h2><a href=\"/n\">Choir sings with two famous guests</a></h2>"
                              "<p>The choir is still doing its thing, and now it has asked two "
                              "famous musicians to play along with everyone.</p>"
                              "<h3><a href=\"/n\">Read the rest</a></h3></div></div>"
                              "</body></html>");
  CHECK(has(x.text, "The council approved"));
  CHECK_FALSE(has(x.text, "famous guests"));
  CHECK_FALSE(has(x.text, "play along"));
}

TEST_CASE("extract_boilerplate keeps an article built of Elementor widgets, "
          "drops their share buttons") {
  auto widget = [](const std::string& kind, const std::string& inner) {
    return "<div class=\"elementor-element elementor-widget elementor-widget-" + kind
           + "\"><div class=\"elementor-widget-container\">" + inner + "</div></div>";
  };
  std::string article;
  for (int i = 0; i < 5; ++i)
    article += widget("text-editor", para)
               + widget("text-editor", "<p>Section " + std::to_string(i)
                                         + " of the report names the "
                                           "contractor, the cost and the "
                                           "date of completion.</p>");
  article += widget("share-buttons", "<a href=\"/s\">Share on Facebook and "
                                     "with all your friends today</a>");
  auto x = ce::extract_html("<html><body><div class=\"elementor-section\">" + article
                            + "</div><div class=\"sidebar\"><h3>Latest posts</h3><ul>"
                              "<li><a href=\"/1\">Summer sale: the seven best deals</a></li>"
                              "<li><a href=\"/2\">The loveliest maxi dresses</a></li></ul></div>"
                              "</body></html>");
  CHECK(has(x.text, "The council approved"));
  CHECK(has(x.text, "Section 4 of the report"));
  CHECK_FALSE(has(x.text, "Share on Facebook"));
  CHECK_FALSE(has(x.text, "Summer sale"));
}

TEST_CASE("extract_boilerplate drops image credits, a date or time alone, comment "
          "counts and a line of an entry's details, and keeps look-alikes that are "
          "content") {
  auto x = ce::extract_html(
    "<html><body><article><h1>Bridge approved</h1>"
    "<div class=\"title\"><div style=\"float:right\">3:59 PM </div>The bridge</div>"
    + para
    + "<p><img src=\"a.jpg\"><br><em>(Credit: Jane Roe / Agency)</em></p>"
      "<div class=\"img__cont\"><div class=\"img__cont__copy\">The old bridge in 1950."
      "</div><div class=\"img__cont__author\">Photograph by <span>Jane Roe, "
      "City Archive</span></div></div>"
    + para + "<p>Foto: dpa</p><p>August 5, 2019 at 1:46 pm</p><p>26.10.2010</p>" + para
    + "<p>Credit cards: what the council pays with</p>"
      "<p>The vote was 3:2 in favour.</p>"
      "<p>Imagery: satellites showed the river.</p>"
      "<ol><li>May 15, 2019</li><li>Le 15 Mai</li></ol>"
      "<table><tr><th>Day</th><th>Cars</th></tr><tr><td>5 March 2020</td><td>12</td>"
      "</tr><tr><td>6 March 2020</td><td>14</td></tr></table>"
      "<p>Views: 1120 | Added by: Posh | Tags: bridges, council | Rating: 0.0/0</p>"
      "<p>Comments: 0</p><p>3 Kommentare</p>"
      "</article></body></html>");
  CAPTURE(x.text);
  CHECK(has(x.text, "The council approved the new bridge"));
  CHECK(has(x.text, "The old bridge in 1950."));
  CHECK_FALSE(has(x.text, "Credit: Jane Roe"));
  CHECK_FALSE(has(x.text, "Photograph by"));
  CHECK_FALSE(has(x.text, "Foto: dpa"));
  CHECK_FALSE(has(x.text, "3:59 PM"));
  CHECK_FALSE(has(x.text, "August 5, 2019"));
  CHECK_FALSE(has(x.text, "26.10.2010"));
  CHECK_FALSE(has(x.text, "Views: 1120"));
  CHECK_FALSE(has(x.text, "Comments: 0"));
  CHECK_FALSE(has(x.text, "3 Kommentare"));
  // Look-alikes that are content, and dates in a list or a table.
  CHECK(has(x.text, "Credit cards: what the council pays with"));
  CHECK(has(x.text, "The vote was 3:2 in favour."));
  CHECK(has(x.text, "Imagery: satellites showed the river."));
  CHECK(has(x.text, "May 15, 2019"));
  CHECK(has(x.text, "Le 15 Mai"));
  CHECK(has(x.text, "5 March 2020"));
}

TEST_CASE("extract_boilerplate keeps the post of a platform that calls every box a "
          "widget, and drops the widgets around it") {
  // Blogger: the posts are in "widget Blog", beside label and archive
  // widgets that hold most of the page's text; the post is lines parted by
  // <br>, with no paragraph to count as prose.
  std::string lines;
  for (int i = 0; i < 12; ++i)
    lines += "Line " + std::to_string(i) + " of the song that the post is about<br />";
  std::string labels;
  for (int i = 0; i < 300; ++i)
    labels += "<li><a href=\"/search/label/L" + std::to_string(i) + "\">Singer number "
              + std::to_string(i) + "</a> (3)</li>";
  auto x = ce::extract_html(
    "<html><body><div class=\"main section\" id=\"main\">"
    "<div class=\"widget Blog\" id=\"Blog1\"><div class=\"post hentry\">"
    "<h3 class=\"post-title entry-title\">A song</h3>"
    "<div class=\"post-body entry-content\">"
    + lines
    + "</div></div></div></div>"
      "<div class=\"sidebar section\"><div class=\"widget Label\" id=\"Label1\">"
      "<h2>Labels</h2><ul>"
    + labels + "</ul></div></div></body></html>");
  CAPTURE(x.text);
  CHECK(has(x.text, "Line 0 of the song"));
  CHECK(has(x.text, "Line 11 of the song"));
  CHECK_FALSE(has(x.text, "Singer number"));
}

} // namespace extract_boilerplate_test
