/* options.c: the option engine (see options.h): defaults, args files, the command line, strict
 * values, ranges, required flags, --help by group. Every message names the flag it is about. */
#include "app/core/options.h"
#include "app/core/error.h"

#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct parse_state {
    const option_table *table;
    void *dest;
    unsigned char *given;
    char *err;
    size_t errlen;
} parse_state;

/* an interval from a table's range text: "[1, inf)", "(0, 1]", ... */
typedef struct interval {
    double low, high;
    int low_open, high_open;
} interval;

/* whether name is one of the '|'-separated words of list */
static int in_choices(const char *value, const char *choices);

/* the flag called name, or by one of its aliases when aliases is set; -1 when none */
static int find_spec_by(const option_table *table, const char *name, int aliases) {
    for (int i = 0; i < table->count; i++)
        if (strcmp(table->specs[i].name, name) == 0) return i;
    if (aliases)
        for (int i = 0; i < table->count; i++)
            if (table->specs[i].aliases && in_choices(name, table->specs[i].aliases)) return i;
    return -1;
}

static int find_spec(const option_table *table, const char *name) { return find_spec_by(table, name, 0); }

int options_given(const option_table *table, const unsigned char *given, const char *name) {
    int index = find_spec(table, name);
    CHECK(index >= 0, "options_given: no flag --%s in the table", name);
    return given[index];
}

static int in_choices(const char *value, const char *choices) {
    size_t n = strlen(value);
    for (const char *c = choices; *c;) {
        const char *bar = strchr(c, '|');
        size_t len = bar ? (size_t)(bar - c) : strlen(c);
        if (len == n && strncmp(c, value, n) == 0) return 1;
        if (!bar) break;
        c = bar + 1;
    }
    return 0;
}

/* the range text of the table; a malformed one is a bug in the program's table */
static interval parse_interval(const option_spec *spec) {
    interval r;
    const char *text = spec->range;
    char *end;
    CHECK(text[0] == '[' || text[0] == '(', "--%s: malformed range \"%s\"", spec->name, text);
    r.low_open = text[0] == '(';
    r.low = strtod(text + 1, &end);
    CHECK(*end == ',', "--%s: malformed range \"%s\"", spec->name, text);
    r.high = strtod(end + 1, &end);
    CHECK((*end == ']' || *end == ')') && end[1] == '\0', "--%s: malformed range \"%s\"", spec->name, text);
    r.high_open = *end == ')';
    return r;
}

static int in_interval(const interval *r, double v) {
    return (r->low_open ? v > r->low : v >= r->low) && (r->high_open ? v < r->high : v <= r->high);
}

/* "must be positive", "must not be negative" or "must be in RANGE" for the table's range */
static const char *range_phrase(const option_spec *spec, const interval *r, char *out, size_t len) {
    int integer = spec->kind != OPTION_FLOAT;
    if (isinf(r->high) && r->high > 0) {
        if ((integer && r->low == 1 && !r->low_open) || (r->low == 0 && r->low_open))
            return "must be positive";
        if (r->low == 0 && !r->low_open) return "must not be negative";
    }
    snprintf(out, len, "must be in %s", spec->range);
    return out;
}

/* integers of a type holding [type_min, type_max], checked against the table's range */
static int parse_integer(parse_state *st, const option_spec *spec, const char *value,
                         const char *where, long long type_min, long long type_max, long long *out) {
    char *end;
    errno = 0;
    long long v = strtoll(value, &end, 10);
    if (value[0] == '\0' || isspace((unsigned char)value[0]) || *end != '\0')
        return error_format(st->err, st->errlen, "%s--%s expects an integer, got '%s'", where,
                            spec->name, value);
    int overflow = errno == ERANGE;
    char shown[64], phrase[128];
    if (overflow) snprintf(shown, sizeof shown, "%.40s", value);
    else snprintf(shown, sizeof shown, "%lld", v);
    double low = -INFINITY, high = INFINITY;
    if (spec->range) {
        interval r = parse_interval(spec);
        if (!in_interval(&r, (double)v))
            return error_format(st->err, st->errlen, "%s--%s %s, got %s", where, spec->name,
                                range_phrase(spec, &r, phrase, sizeof phrase), shown);
        low = r.low_open ? floor(r.low) + 1 : ceil(r.low);
        high = r.high_open ? ceil(r.high) - 1 : floor(r.high);
    }
    if (overflow || v < type_min || v > type_max) {
        long long lo = low > (double)type_min ? (long long)low : type_min;
        long long hi = high < (double)type_max ? (long long)high : type_max;
        return error_format(st->err, st->errlen, "%s--%s must be in [%lld, %lld], got %s", where,
                            spec->name, lo, hi, shown);
    }
    *out = v;
    return 0;
}

static int parse_float(parse_state *st, const option_spec *spec, const char *value,
                       const char *where, float *out) {
    char *end;
    errno = 0;
    double v = strtod(value, &end);
    int overflow = errno == ERANGE && isinf(v);
    if (value[0] == '\0' || isspace((unsigned char)value[0]) || *end != '\0' || isnan(v) ||
        (isinf(v) && !overflow) || strpbrk(value, "xX"))  /* decimal only: no hex floats */
        return error_format(st->err, st->errlen, "%s--%s expects a number, got '%s'", where,
                            spec->name, value);
    if (spec->range) {
        interval r = parse_interval(spec);
        char phrase[128];
        if (!in_interval(&r, v))
            return error_format(st->err, st->errlen, "%s--%s %s, got %g", where, spec->name,
                                range_phrase(spec, &r, phrase, sizeof phrase), v);
    }
    if (overflow || fabs(v) > FLT_MAX)
        return error_format(st->err, st->errlen,
                            "%s--%s is out of range for a float (magnitude at most %g), got '%s'",
                            where, spec->name, FLT_MAX, value);
    *out = (float)v;
    return 0;
}

static int set_text(parse_state *st, const option_spec *spec, const char *value, const char *where) {
    size_t len = strlen(value);
    if (len >= spec->size)
        return error_format(st->err, st->errlen, "%s--%s value is too long (%zu characters, at most %zu)",
                            where, spec->name, len, spec->size - 1);
    memcpy((char *)st->dest + spec->offset, value, len + 1);
    return 0;
}

static int store_value(parse_state *st, const option_spec *spec, const char *value, const char *where);

/* store value (text) in spec's field; `where` ("FILE:LINE: " or "") prefixes messages. A flag
 * with no effect here has no field: its value is checked the same way into scratch space. */
static int set_value(parse_state *st, const option_spec *spec, const char *value, const char *where) {
    if (!(spec->flags & OPTION_NO_EFFECT)) return store_value(st, spec, value, where);
    union { char text[4096]; int64_t number; } scratch;
    parse_state scratch_state = *st;
    option_spec scratch_spec = *spec;
    scratch_state.dest = &scratch;
    scratch_spec.offset = 0;
    scratch_spec.size = sizeof scratch;
    return store_value(&scratch_state, &scratch_spec, value, where);
}

static int store_value(parse_state *st, const option_spec *spec, const char *value, const char *where) {
    char *field = (char *)st->dest + spec->offset;
    long long v;
    switch (spec->kind) {
    case OPTION_INT:
        if (parse_integer(st, spec, value, where, INT_MIN, INT_MAX, &v)) return -1;
        *(int *)field = (int)v;
        return 0;
    case OPTION_INT64:
        if (parse_integer(st, spec, value, where, INT64_MIN, INT64_MAX, &v)) return -1;
        *(int64_t *)field = v;
        return 0;
    case OPTION_UINT64: {
        char *end;
        errno = 0;
        unsigned long long u = strtoull(value, &end, 10);
        if (!isdigit((unsigned char)value[0]) || *end != '\0')
            return error_format(st->err, st->errlen, "%s--%s expects a non-negative integer, got '%s'",
                                where, spec->name, value);
        if (errno == ERANGE)
            return error_format(st->err, st->errlen, "%s--%s must be in [0, %llu], got %.40s", where,
                                spec->name, (unsigned long long)UINT64_MAX, value);
        *(uint64_t *)field = u;
        return 0;
    }
    case OPTION_FLOAT:
        return parse_float(st, spec, value, where, (float *)field);
    case OPTION_CHOICE:
        if (!in_choices(value, spec->choices))
            return error_format(st->err, st->errlen, "%s--%s must be one of %s, got '%s'", where,
                                spec->name, spec->choices, value);
        return set_text(st, spec, value, where);
    case OPTION_STRING:
    case OPTION_LIST:
        return set_text(st, spec, value, where);
    case OPTION_FLAG:
        *(int *)field = 1;
        return 0;
    }
    return error_format(st->err, st->errlen, "--%s: unknown option kind", spec->name);
}

/* zero every flag's field, then parse its default; defaults skip the range and choice checks
 * (a sentinel or "" may stand for "not given"); one that does not parse is a bug in the table */
static void set_defaults(parse_state *st) {
    for (int i = 0; i < st->table->count; i++) {
        option_spec unchecked = st->table->specs[i];
        if (unchecked.flags & (OPTION_NO_EFFECT | OPTION_REFUSED)) continue; /* no field */
        memset((char *)st->dest + unchecked.offset, 0, unchecked.size);
        if (!unchecked.default_value) continue;
        unchecked.range = NULL;
        if (unchecked.kind == OPTION_CHOICE) unchecked.kind = OPTION_STRING;
        CHECK(set_value(st, &unchecked, unchecked.default_value, "") == 0, "bad default: %s", st->err);
    }
}

/* the words after a list flag up to the next flag, joined by one space, into list[size] */
static int gather_list(parse_state *st, const option_spec *spec, size_t size, int count, char **tokens, int *i,
                       const char *where, char *list) {
    size_t used = 0;
    list[0] = '\0';
    while (*i + 1 < count && strncmp(tokens[*i + 1], "--", 2) != 0) {
        const char *word = tokens[++*i];
        if (used + (used > 0) + strlen(word) >= size)
            return error_format(st->err, st->errlen, "%s--%s has too many values (at most %zu characters)",
                                where, spec->name, size - 1);
        used += (size_t)sprintf(list + used, "%s%s", used ? " " : "", word);
    }
    if (used == 0) return error_format(st->err, st->errlen, "%s--%s is missing its value", where, spec->name);
    return 0;
}

/* parse a token list (argv-like); file/lines (NULL for the command line) place each token */
static int parse_tokens(parse_state *st, int count, char **tokens, const char *file, const int *lines) {
    for (int i = 0; i < count; i++) {
        char where[1100] = "";
        if (file) snprintf(where, sizeof where, "%.1024s:%d: ", file, lines[i]);
        const char *token = tokens[i];
        if (strncmp(token, "--", 2) != 0)
            return error_format(st->err, st->errlen, "%sunexpected argument '%s' (flags start with --)",
                                where, token);
        char name[128];
        const char *eq = strchr(token + 2, '=');
        size_t len = eq ? (size_t)(eq - token - 2) : strlen(token + 2);
        if (len >= sizeof name)
            return error_format(st->err, st->errlen, "%sunknown flag '%.200s'", where, token);
        memcpy(name, token + 2, len);
        name[len] = '\0';
        if (strcmp(name, "args-file") == 0) {
            if (file)
                return error_format(st->err, st->errlen, "%s--args-file cannot appear inside an args file", where);
            if (!eq) i++;  /* read before the command line, by options_parse */
            continue;
        }
        if (strcmp(name, "help") == 0 || strcmp(name, "help-megatron-flags") == 0) continue;
        int index = find_spec_by(st->table, name, 1);
        if (index < 0)
            return error_format(st->err, st->errlen, "%sunknown flag '--%s' (see --help)", where, name);
        const option_spec *spec = &st->table->specs[index];
        if (spec->flags & OPTION_REFUSED)
            return error_format(st->err, st->errlen, "%sflag --%s of Megatron-LM is not supported here: %s",
                                where, name, spec->help);
        const char *value = NULL;
        char *list = NULL;
        if (spec->kind == OPTION_FLAG) {
            if (eq) return error_format(st->err, st->errlen, "%s--%s takes no value", where, name);
        } else if (eq) {
            value = eq + 1;
        } else if (spec->kind == OPTION_LIST) {
            /* a no-effect flag has no field: its words are checked into scratch space (set_value's) */
            size_t size = spec->flags & OPTION_NO_EFFECT ? 4096 : spec->size;
            list = malloc(size);
            CHECK(list, "out of memory");
            if (gather_list(st, spec, size, count, tokens, &i, where, list)) {
                free(list);
                return -1;
            }
            value = list;
        } else {
            if (i + 1 >= count || strncmp(tokens[i + 1], "--", 2) == 0 || (file && lines[i + 1] != lines[i]))
                return error_format(st->err, st->errlen, "%s--%s is missing its value", where, name);
            value = tokens[++i];
        }
        int rc = set_value(st, spec, value, where);
        free(list);
        if (rc) return -1;
        st->given[index] = 1;
    }
    return 0;
}

/* an args file: whitespace-separated tokens, '#' to the end of the line is a comment */
static int parse_args_file(parse_state *st, const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return error_format(st->err, st->errlen, "cannot open args file '%s': %s", path, strerror(errno));
    /* a regular file (or a pipe, as from `--args-file <(...)`); a folder would read as empty */
    struct stat st_file;
    if (fstat(fileno(f), &st_file) != 0 || !(S_ISREG(st_file.st_mode) || S_ISFIFO(st_file.st_mode))) {
        int folder = S_ISDIR(st_file.st_mode);
        fclose(f);
        return error_format(st->err, st->errlen, "args file '%s' is %s, not a file of flags", path,
                            folder ? "a directory" : "not a regular file");
    }
    int cap = 64, count = 0, line_number = 0;
    char **tokens = malloc(sizeof(char *) * (size_t)cap);
    int *lines = malloc(sizeof(int) * (size_t)cap);
    CHECK(tokens && lines, "out of memory");
    char *line = NULL;
    size_t line_cap = 0;
    while (getline(&line, &line_cap, f) >= 0) {
        line_number++;
        char *hash = strchr(line, '#');
        if (hash) *hash = '\0';
        for (char *save = NULL, *t = strtok_r(line, " \t\r\n", &save); t; t = strtok_r(NULL, " \t\r\n", &save)) {
            if (count == cap) {
                cap *= 2;
                tokens = realloc(tokens, sizeof(char *) * (size_t)cap);
                lines = realloc(lines, sizeof(int) * (size_t)cap);
                CHECK(tokens && lines, "out of memory");
            }
            tokens[count] = strdup(t);
            CHECK(tokens[count], "out of memory");
            lines[count++] = line_number;
        }
    }
    free(line);
    int read_error = ferror(f) ? errno : 0;
    fclose(f);
    int rc = read_error ? error_format(st->err, st->errlen, "cannot read args file '%s': %s", path, strerror(read_error))
                        : parse_tokens(st, count, tokens, path, lines);
    for (int i = 0; i < count; i++) free(tokens[i]);
    free(tokens);
    free(lines);
    return rc;
}

int options_parse(const option_table *table, void *dest, unsigned char *given, int argc,
                  char **argv, char *err, size_t errlen) {
    int rc = options_parse_flags(table, dest, given, argc, argv, err, errlen);
    return rc ? rc : options_check_required(table, given, err, errlen);
}

int options_check_required(const option_table *table, const unsigned char *given, char *err, size_t errlen) {
    for (int i = 0; i < table->count; i++)
        if ((table->specs[i].flags & OPTION_REQUIRED) && !given[i])
            return error_format(err, errlen, "--%s is required", table->specs[i].name);
    return 0;
}

int options_parse_flags(const option_table *table, void *dest, unsigned char *given, int argc,
                        char **argv, char *err, size_t errlen) {
    parse_state st = {table, dest, given, err, errlen};
    memset(given, 0, (size_t)table->count);
    set_defaults(&st);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) return OPTIONS_HELP;
        if (strcmp(argv[i], "--help-megatron-flags") == 0) return OPTIONS_HELP_FLAGS;
    }
    /* first the args file(s), then the command line so that it overrides them */
    for (int i = 1; i < argc; i++) {
        const char *path = NULL;
        if (strcmp(argv[i], "--args-file") == 0) {
            if (i + 1 >= argc || strncmp(argv[i + 1], "--", 2) == 0)
                return error_format(err, errlen, "--args-file is missing its value");
            path = argv[++i];
        } else if (strncmp(argv[i], "--args-file=", 12) == 0) {
            path = argv[i] + 12;
        }
        if (path && parse_args_file(&st, path)) return -1;
    }
    if (parse_tokens(&st, argc - 1, argv + 1, NULL, NULL)) return -1;
    return 0;
}

void options_parse_or_exit(const option_table *table, void *dest, unsigned char *given, int argc,
                           char **argv) {
    char err[2048];
    int rc = options_parse(table, dest, given, argc, argv, err, sizeof err);
    if (rc == OPTIONS_HELP || rc == OPTIONS_HELP_FLAGS) {
        int initialized = 0, rank = 0;
        MPI_Initialized(&initialized);
        if (initialized) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        if (rank == 0 && rc == OPTIONS_HELP) options_print_help(table);
        if (rank == 0 && rc == OPTIONS_HELP_FLAGS) options_print_flag_table(table);
        if (initialized) MPI_Finalize();
        exit(0);
    }
    if (rc) user_error("%s", err);
}

static const char *metavar(const option_spec *spec) {
    if (spec->metavar) return spec->metavar;
    switch (spec->kind) {
    case OPTION_FLOAT: return "X";
    case OPTION_STRING: return "PATH";
    case OPTION_LIST: return "PATH ...";
    default: return "N";
    }
}

/* "--name", "--name {a|b}" or "--name METAVAR" */
static void flag_synopsis(const option_spec *spec, char *out, size_t len) {
    if (spec->kind == OPTION_FLAG) snprintf(out, len, "--%s", spec->name);
    else if (spec->kind == OPTION_CHOICE) snprintf(out, len, "--%s {%s}", spec->name, spec->choices);
    else snprintf(out, len, "--%s %s", spec->name, metavar(spec));
}

static void print_flag_help(const option_spec *spec) {
    char left[128];
    if (spec->flags & OPTION_REFUSED) return; /* listed by --help-megatron-flags */
    flag_synopsis(spec, left, sizeof left);
    printf("  %-46s %s%s", left, spec->flags & OPTION_NO_EFFECT ? "accepted, no effect here: " : "", spec->help);
    if (spec->aliases) {
        printf(" (also");
        for (const char *a = spec->aliases; *a;) {
            size_t len = strcspn(a, "|");
            printf(" --%.*s", (int)len, a);
            a += len + (a[len] == '|');
        }
        printf(")");
    }
    if (spec->flags & OPTION_REQUIRED) printf(" (required)");
    else if (spec->default_value && spec->default_value[0] && spec->kind != OPTION_FLAG)
        printf(" (default %s)", spec->default_value);
    printf("\n");
}

void options_print_help(const option_table *table) {
    printf("usage: %s %s\n\n%s", program_name, table->usage, table->description);
    for (int i = 0; i < table->count; i++) {
        const char *group = table->specs[i].group;
        int first = 1;  /* the group's first flag: print the whole group here */
        for (int j = 0; j < i && first; j++) first = strcmp(table->specs[j].group, group) != 0;
        if (!first) continue;
        printf("\n%s:\n", group);
        for (int j = i; j < table->count; j++)
            if (strcmp(table->specs[j].group, group) == 0) print_flag_help(&table->specs[j]);
    }
    printf("\nother:\n  %-46s %s\n  %-46s %s\n  %-46s %s\n", "--args-file PATH",
           "read flags from PATH first (one per line, '#' comments; the command line overrides)",
           "--help", "show this help and exit", "--help-megatron-flags",
           "list every flag with its status here (works, no effect, refused) as a Markdown table");
}

/* text with '|' escaped for a Markdown table cell */
static void put_cell(const char *text) {
    for (const char *c = text; *c; c++) fputs(*c == '|' ? "\\|" : (char[2]){*c, 0}, stdout);
}

static const char *status_word(const option_spec *spec) {
    return spec->flags & OPTION_REFUSED ? "refused" : spec->flags & OPTION_NO_EFFECT ? "accepted, no effect" : "works";
}

void options_print_flag_table(const option_table *table) {
    printf("| flag | status here |\n| --- | --- |\n");
    for (int i = 0; i < table->count; i++) {
        const option_spec *spec = &table->specs[i];
        char synopsis[160];
        flag_synopsis(spec, synopsis, sizeof synopsis);
        printf("| `");
        put_cell(synopsis);
        printf("` | %s: ", status_word(spec));
        put_cell(spec->help);
        printf(" |\n");
        for (const char *a = spec->aliases; a && *a;) {
            size_t len = strcspn(a, "|");
            option_spec alias = *spec;
            char name[128];
            snprintf(name, sizeof name, "%.*s", (int)len, a);
            alias.name = name;
            flag_synopsis(&alias, synopsis, sizeof synopsis);
            printf("| `");
            put_cell(synopsis);
            printf("` | %s: ", status_word(spec));
            put_cell(spec->help);
            printf(" (another spelling of --%s) |\n", spec->name);
            a += len + (a[len] == '|');
        }
    }
}

int options_no_effect_given(const option_table *table, const unsigned char *given, char *out,
                            size_t len) {
    int count = 0;
    size_t used = 0;
    out[0] = '\0';
    for (int i = 0; i < table->count; i++) {
        if (!(table->specs[i].flags & OPTION_NO_EFFECT) || !given[i]) continue;
        int n = snprintf(out + used, len - used, "%s--%s", count ? ", " : "", table->specs[i].name);
        if (n > 0 && (size_t)n < len - used) used += (size_t)n;
        count++;
    }
    return count;
}

void options_format_value(const option_spec *spec, const void *dest, char *out, size_t len) {
    const char *field = (const char *)dest + spec->offset;
    switch (spec->kind) {
    case OPTION_INT: snprintf(out, len, "%d", *(const int *)field); break;
    case OPTION_INT64: snprintf(out, len, "%lld", (long long)*(const int64_t *)field); break;
    case OPTION_UINT64: snprintf(out, len, "%llu", (unsigned long long)*(const uint64_t *)field); break;
    case OPTION_FLOAT: snprintf(out, len, "%g", *(const float *)field); break;
    case OPTION_STRING:
    case OPTION_CHOICE:
    case OPTION_LIST: snprintf(out, len, "%s", field[0] ? field : "None"); break;
    case OPTION_FLAG: snprintf(out, len, "%s", *(const int *)field ? "True" : "False"); break;
    }
}
