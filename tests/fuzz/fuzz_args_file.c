/* fuzz_args_file.c: libFuzzer target for an args file (app/core/options.c, --args-file) parsed
 * against a table with one flag of every kind. */
#include "app/core/options.h"
#include "tests/fuzz/fuzz_util.h"

typedef struct fuzz_options {
    int count, flag;
    int64_t big;
    uint64_t seed;
    float rate;
    char name[32], choice[16], list[256];
} fuzz_options;

#define AT(field) OPTION_AT(fuzz_options, field)
static const option_spec specs[] = {
    {"count", "g", OPTION_INT, AT(count), "1", .range = "[1, 100]"},
    {"flag", "g", OPTION_FLAG, AT(flag)},
    {"big", "g", OPTION_INT64, AT(big), .range = "[0, inf)"},
    {"seed", "g", OPTION_UINT64, AT(seed)},
    {"rate", "g", OPTION_FLOAT, AT(rate), "0.5", .range = "(0, 1]"},
    {"name", "g", OPTION_STRING, AT(name)},
    {"choice", "g", OPTION_CHOICE, AT(choice), "a", .choices = "a|bb|ccc"},
    {"list", "g", OPTION_LIST, AT(list)},
};
static const option_table table = {"", "", specs, (int)(sizeof specs / sizeof specs[0])};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_file(0, "args.txt", data, size);
    char *argv[] = {"fuzz", "--args-file", (char *)path, NULL};
    fuzz_options o;
    unsigned char given[sizeof specs / sizeof specs[0]];
    char err[1024];
    memset(&o, 0, sizeof o);
    options_parse(&table, &o, given, 3, argv, err, sizeof err);
    return 0;
}
