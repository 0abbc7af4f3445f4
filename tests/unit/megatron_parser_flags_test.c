/* megatron_parser_flags_test.c: every option string of Megatron-LM's argument parser
 * (tests/data/megatron_parser_flags.txt, from tests/tools/megatron_parser_flags.py) is known to
 * pretrain_gpt's option table, by its name or as an alias, and each is parsed the way its status
 * says: a flag that works is never "unknown"; a no-effect flag is accepted on top of a valid
 * command line and named in the start-up's no-effect list; a refused flag stops the parse with
 * "flag --X of Megatron-LM is not supported here: WHY". Megatron's flags that take no value take
 * none here, and those that take one take one; no spelling names two rows. Fails naming every
 * flag that does not. */
#include "app/core/options.h"
#include "app/training/args.h"
#include "tests/tap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the row of spelling (its name or one of its aliases) */
static const option_spec *find(const option_table *table, const char *spelling) {
    size_t n = strlen(spelling);
    for (int i = 0; i < table->count; i++) {
        const option_spec *spec = &table->specs[i];
        if (!strcmp(spec->name, spelling)) return spec;
        for (const char *a = spec->aliases; a && *a;) {
            size_t len = strcspn(a, "|");
            if (len == n && !strncmp(a, spelling, n)) return spec;
            a += len + (a[len] == '|');
        }
    }
    return NULL;
}

/* a value the row's checks accept: the first choice, the low end of the range, or a word */
static void sample_value(const option_spec *spec, char *out, size_t len) {
    if (spec->kind == OPTION_CHOICE) {
        snprintf(out, len, "%.*s", (int)strcspn(spec->choices, "|"), spec->choices);
    } else if (spec->kind == OPTION_INT || spec->kind == OPTION_INT64 || spec->kind == OPTION_UINT64 ||
               spec->kind == OPTION_FLOAT) {
        double low = 1;
        if (spec->range) {
            low = strtod(spec->range + 1, NULL);
            if (spec->range[0] == '(') low += 1;
        }
        snprintf(out, len, "%g", low);
    } else {
        snprintf(out, len, "x");
    }
}

/* how many rows a spelling names (as the name or an alias): a second would be unreachable */
static int rows_named(const option_table *table, const char *spelling) {
    int rows = 0;
    size_t n = strlen(spelling);
    for (int i = 0; i < table->count; i++) {
        const option_spec *spec = &table->specs[i];
        int named = !strcmp(spec->name, spelling);
        for (const char *a = spec->aliases; a && *a && !named;) {
            size_t len = strcspn(a, "|");
            named = len == n && !strncmp(a, spelling, n);
            a += len + (a[len] == '|');
        }
        rows += named;
    }
    return rows;
}

int main(void) {
    const char *top = getenv("top_srcdir");
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/data/megatron_parser_flags.txt", top ? top : ".");
    FILE *f = fopen(path, "r");
    if (!tap_ok(f != NULL, "read %s", path)) return tap_done();
    const option_table *table = args_option_table();
    char line[1024], missing[8192] = "", wrong_kind[8192] = "", misparsed[8192] = "";
    int count = 0, works = 0, no_effect = 0, refused = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#') continue;
        char *spelling = strtok(line, "\t\n"), *kind = strtok(NULL, "\t\n");
        if (!spelling || !kind || strncmp(spelling, "--", 2) != 0) continue;
        count++;
        const option_spec *spec = find(table, spelling + 2);
        if (!spec) {
            if (strlen(missing) < sizeof missing - 100) strcat(missing, " "), strcat(missing, spelling);
            continue;
        }
        if ((strcmp(kind, "flag") == 0) != (spec->kind == OPTION_FLAG)) {
            if (strlen(wrong_kind) < sizeof wrong_kind - 100) strcat(wrong_kind, " "), strcat(wrong_kind, spelling);
            continue;
        }
        /* parse it on top of a command line that is valid by itself */
        char value[64];
        sample_value(spec, value, sizeof value);
        char *argv[] = {"pretrain_gpt", "--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4",
                        "--seq-length", "16", "--micro-batch-size", "2", "--lr", "1e-3", "--mock-data",
                        "--vocab-size", "64", "--train-iters", "1", "--tensorboard-dir", "tb", spelling, value, NULL};
        int argc = (int)(sizeof argv / sizeof argv[0]) - (spec->kind == OPTION_FLAG ? 2 : 1);
        args *a = calloc(1, sizeof *a);
        char err[2048] = "";
        int rc = args_parse_checked(a, argc, argv, 1, err, sizeof err);
        int good;
        if (spec->flags & OPTION_REFUSED) {
            char want[2300];
            snprintf(want, sizeof want, "flag %s of Megatron-LM is not supported here: %s", spelling, spec->help);
            good = rc == -1 && strcmp(err, want) == 0;
            refused++;
        } else if (spec->flags & OPTION_NO_EFFECT) {
            char named[160];
            snprintf(named, sizeof named, "--%s", spec->name);
            good = rc == 0 && strstr(a->no_effect_flags, named) != NULL;
            no_effect++;
        } else {
            good = strstr(err, "unknown flag") == NULL && strstr(err, "of Megatron-LM is not supported here") == NULL;
            works++;
        }
        if (!good && strlen(misparsed) < sizeof misparsed - 300) {
            char one[300];
            snprintf(one, sizeof one, " %s (%s)", spelling, err[0] ? err : "accepted");
            strcat(misparsed, one);
        }
        free(a);
    }
    fclose(f);
    char twice[4096] = "";
    for (int i = 0; i < table->count; i++) {
        const option_spec *spec = &table->specs[i];
        char name[128];
        snprintf(name, sizeof name, "%s", spec->name);
        if (rows_named(table, name) != 1 && strlen(twice) < sizeof twice - 200) strcat(twice, " --"), strcat(twice, name);
        for (const char *a = spec->aliases; a && *a;) {
            size_t len = strcspn(a, "|");
            snprintf(name, sizeof name, "%.*s", (int)len, a);
            if (rows_named(table, name) != 1 && strlen(twice) < sizeof twice - 200) strcat(twice, " --"), strcat(twice, name);
            a += len + (a[len] == '|');
        }
    }
    tap_ok(!twice[0], "no spelling names two rows of the table (twice:%s)", twice[0] ? twice : " none");
    tap_ok(count >= 800, "%d option strings of Megatron-LM's parser read", count);
    tap_ok(!missing[0], "every one is a row of pretrain_gpt's option table (missing:%s)", missing[0] ? missing : " none");
    tap_ok(!wrong_kind[0], "each takes a value here exactly when it takes one in Megatron (differing:%s)",
           wrong_kind[0] ? wrong_kind : " none");
    tap_ok(!misparsed[0], "each parses as its status says: %d work, %d accepted with no effect (named at start-up), "
           "%d refused with their reason (wrong:%s)", works, no_effect, refused, misparsed[0] ? misparsed : " none");
    return tap_done();
}
