/* detokenizer_test.c: Megatron's zero-shot detokenizers (app/inference/wikitext_detokenizer.c)
 * against the outputs of Megatron's own Python functions (tasks/zeroshot_gpt/detokenizer.py,
 * run on these inputs when the test was written): WikiText's separators, punctuation, brackets,
 * quotes, headings, degrees and its odd "/' [0-9]/" rule; PTB's contractions; text left alone;
 * the file-name choice; a file that is not UTF-8 refused. */
#include <stdlib.h>
#include <string.h>

#include "app/inference/wikitext_detokenizer.h"
#include "tests/tap.h"

static const char *cases[][3] = { /* input, wikitext_detokenizer(input), ptb_detokenizer(input) */
    {" = Valkyria Chronicles III = \n \n Senj\xc5""\x8d"" no Valkyria 3 : Unrecorded Chronicles ( Japanese : \xe6""\x88""\xa6""\xe5""\xa0""\xb4""\xe3""\x81""\xae""\xe3""\x83""\xb4""\xe3""\x82""\xa1""\xe3""\x83""\xab""\xe3""\x82""\xad""\xe3""\x83""\xa5""\xe3""\x83""\xaa""\xe3""\x82""\xa2""3 , lit . Valkyria of the Battlefield 3 ) , commonly referred to as Valkyria Chronicles III outside Japan , is a tactical role @-@ playing video game . \n",
     " = Valkyria Chronicles III =\n\nSenj\xc5""\x8d"" no Valkyria 3: Unrecorded Chronicles (Japanese: \xe6""\x88""\xa6""\xe5""\xa0""\xb4""\xe3""\x81""\xae""\xe3""\x83""\xb4""\xe3""\x82""\xa1""\xe3""\x83""\xab""\xe3""\x82""\xad""\xe3""\x83""\xa5""\xe3""\x83""\xaa""\xe3""\x82""\xa2""3, lit. Valkyria of the Battlefield 3), commonly referred to as Valkyria Chronicles III outside Japan, is a tactical role-playing video game.\n",
     " = Valkyria Chronicles III =\n\nSenj\xc5""\x8d"" no Valkyria 3 : Unrecorded Chronicles ( Japanese : \xe6""\x88""\xa6""\xe5""\xa0""\xb4""\xe3""\x81""\xae""\xe3""\x83""\xb4""\xe3""\x82""\xa1""\xe3""\x83""\xab""\xe3""\x82""\xad""\xe3""\x83""\xa5""\xe3""\x83""\xaa""\xe3""\x82""\xa2""3 , lit . Valkyria of the Battlefield 3 ) , commonly referred to as Valkyria Chronicles III outside Japan , is a tactical role @-@ playing video game .\n"},
    {" = = = = Gameplay = = = = \n The game 's 1 @,@ 000 @.@ 5 km \" long \" road ; it was [ citation needed ] { a } 30 \xc2""\xb0"" C warm ! Was it ? the players ' sides /' 5/ N \n",
     " ==== Gameplay ====\nThe game's 1,000.5 km \"long\" road; it was [citation needed] {a} 30\xc2""\xb0""C warm! Was it? the players' sides /'[0-9]/ N\n",
     " = = = = Gameplay = = = =\nThe game's 1 @,@ 000 @.@ 5 km \" long \" road ; it was [ citation needed ] { a } 30 \xc2""\xb0"" C warm ! Was it ? the players' sides /' 5/ N\n"},
    {"no change here",
     "no change here",
     "no change here"},
    {"( unclosed [ ] ' quoted ' \" x \" \" y",
     "( unclosed [] 'quoted' \"x\" \" y",
     "( unclosed [ ]' quoted' \" x \" \" y"},
};

int main(void) {
    char err[256];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *wiki = detokenize_text(DETOKENIZER_WIKITEXT, cases[i][0], err, sizeof err);
        char *ptb = detokenize_text(DETOKENIZER_PTB, cases[i][0], err, sizeof err);
        char *same = detokenize_text(DETOKENIZER_LAMBADA, cases[i][0], err, sizeof err);
        tap_ok(wiki && !strcmp(wiki, cases[i][1]), "case %zu: the WikiText detokenizer gives Megatron's text", i);
        if (wiki && strcmp(wiki, cases[i][1])) { tap_diag("got      [%s]", wiki); tap_diag("expected [%s]", cases[i][1]); }
        tap_ok(ptb && !strcmp(ptb, cases[i][2]), "case %zu: the PTB detokenizer gives Megatron's text", i);
        tap_ok(same && !strcmp(same, cases[i][0]), "case %zu: the LAMBADA detokenizer leaves the text as it is", i);
        free(wiki); free(ptb); free(same);
    }
    tap_ok(detokenizer_for_path("data/wikitext-103/wiki.test.tokens") == DETOKENIZER_WIKITEXT &&
           detokenizer_for_path("ptb.test.txt") == DETOKENIZER_PTB &&
           detokenizer_for_path("lambada_test.jsonl") == DETOKENIZER_LAMBADA &&
           detokenizer_for_path("other.txt") == DETOKENIZER_NONE, "the detokenizer is chosen by the file name as Megatron does");
    char *bad = detokenize_text(DETOKENIZER_WIKITEXT, "( caf\xe9 )", err, sizeof err);
    tap_ok(bad == NULL && err[0], "text that is not UTF-8 is refused with a message (%s)", err);
    free(bad);
    return tap_done();
}
