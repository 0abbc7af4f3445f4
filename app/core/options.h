/* options.h: the one option engine of every program (pretrain_gpt, preprocess_data,
 * convert_corpus, convert_checkpoint, ...). A program describes its flags in a table; the engine
 * parses "--name value", "--name=value" and args files (--args-file PATH: one flag per line, '#'
 * starts a comment, the command line overrides the file), checks every value strictly (the whole
 * token must parse, numbers against the table's range, choices against the list), prints --help
 * by group, and reports a mistake as one line naming the flag (and FILE:LINE inside an args file)
 * through the err/errlen convention of app/core/error.h. The program keeps its cross-flag checks
 * on top.
 *
 * Megatron-LM flags that do not work here are still rows of the table, so that no flag of a
 * Megatron launch script is "unknown" and none is silently ignored: OPTION_NO_EFFECT marks a
 * flag accepted (its value checked, nothing stored) whose help text says why it changes nothing
 * here; OPTION_REFUSED marks one that stops the program with "flag --X of Megatron-LM is not
 * supported here: HELP", the help saying what to use instead. --help lists the first kind
 * under its group and leaves out the second; --help-megatron-flags prints every flag (and every
 * other spelling of it, option_spec.aliases) with its status as a Markdown table
 * (app/MEGATRON_FLAGS.md). */
#ifndef OPTIONS_H
#define OPTIONS_H

#include <stddef.h>

typedef enum option_kind {
    OPTION_INT,     /* int */
    OPTION_INT64,   /* int64_t */
    OPTION_UINT64,  /* uint64_t (no range: any value of the type) */
    OPTION_FLOAT,   /* float, finite */
    OPTION_STRING,  /* char[size] */
    OPTION_CHOICE,  /* char[size], one of `choices` */
    OPTION_FLAG,    /* int, set to 1 by "--name" (takes no value) */
    OPTION_LIST,    /* char[size]: the words up to the next flag (nargs+), joined by one space */
} option_kind;

/* option_spec.flags */
enum {
    OPTION_REQUIRED = 1,   /* "--name is required" when not given */
    OPTION_NO_EFFECT = 2,  /* accepted, no effect here: help says why (no destination: offset and size 0) */
    OPTION_REFUSED = 4,    /* refused: help says why and what to use instead (no destination) */
};

typedef struct option_spec {
    const char *name;          /* without the leading "--" */
    const char *group;         /* the --help heading it is listed under */
    option_kind kind;
    size_t offset, size;       /* the destination inside the program's struct: OPTION_AT() */
    const char *default_value; /* parsed like a command-line value (unchecked); NULL: zero */
    const char *range;         /* int, int64, float: allowed values as an interval, "[1, inf)",
                                * "(0, inf)", "[0, 1)"; NULL: any value of the type */
    const char *choices;       /* OPTION_CHOICE: "a|b|c" */
    int flags;                 /* OPTION_REQUIRED, OPTION_NO_EFFECT, OPTION_REFUSED */
    const char *metavar;       /* --help's placeholder for the value; NULL: from the kind */
    const char *help;
    const char *aliases;       /* other spellings Megatron-LM accepts for the same flag, "a|b"
                                * (without "--"): parsed as the flag itself, listed as rows of
                                * their own by --help-megatron-flags */
} option_spec;

/* the destination of a flag inside an option_spec initializer: OPTION_AT(struct type, field).
 * A table row reads {name, group, kind, OPTION_AT(...), default, .range = ..., .help = ...}:
 * after the designated offset and size, a positional value initializes default_value. */
#define OPTION_AT(type, field) .offset = offsetof(type, field), .size = sizeof(((type *)0)->field)

/* a program's flags and the text of its --help */
typedef struct option_table {
    const char *usage;         /* printed after "usage: PROGRAM " */
    const char *description;   /* printed under the usage line; ends with a newline */
    const option_spec *specs;
    int count;
} option_table;

enum { OPTIONS_HELP = 1, OPTIONS_HELP_FLAGS = 2 };

/* Sets every flag's field to its default, reads the args files named by --args-file (in order),
 * then the command line, into dest; checks required flags last. given (table->count entries)
 * records which flags the user gave. Returns 0; OPTIONS_HELP when --help or -h appears (nothing
 * is parsed; print it with options_print_help); OPTIONS_HELP_FLAGS for --help-megatron-flags
 * (options_print_flag_table); or -1 with one line in err naming the flag. */
int options_parse(const option_table *table, void *dest, unsigned char *given, int argc,
                  char **argv, char *err, size_t errlen);

/* options_parse in two steps, for a program that fills some flags itself in between (pretrain_gpt's
 * --use-checkpoint-args): every flag but the required check, then the required check alone */
int options_parse_flags(const option_table *table, void *dest, unsigned char *given, int argc,
                        char **argv, char *err, size_t errlen);
int options_check_required(const option_table *table, const unsigned char *given, char *err, size_t errlen);

/* options_parse for a program under MPI: on --help rank 0 prints the help and every rank
 * finalizes MPI and exits 0; a mistake goes to user_error (rank 0 prints
 * "PROGRAM: error: ...", every rank exits 2). */
void options_parse_or_exit(const option_table *table, void *dest, unsigned char *given, int argc,
                           char **argv);

/* whether the user gave flag `name` (file or command line); a name not in the table is a bug */
int options_given(const option_table *table, const unsigned char *given, const char *name);

/* --help on stdout: usage, description, the flags grouped by heading in order of first
 * appearance, then --args-file and --help */
void options_print_help(const option_table *table);

/* --help-megatron-flags on stdout: a Markdown table, one row per flag in table order (each alias
 * in a row of its own after its flag, "... (another spelling of --NAME)"), with its status:
 * "works: WHAT", "accepted, no effect: WHY" or "refused: WHY" */
void options_print_flag_table(const option_table *table);

/* Writes into out the no-effect flags the user gave, as "--a, --b" ("" when none); returns
 * their count. For the start-up line that names them. */
int options_no_effect_given(const option_table *table, const unsigned char *given, char *out,
                            size_t len);

/* a flag's current value as text, Megatron's way: True/False, None for an empty string */
void options_format_value(const option_spec *spec, const void *dest, char *out, size_t len);

#endif
