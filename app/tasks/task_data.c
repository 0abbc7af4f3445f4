/* task_data.c: MNLI (GLUE TSV) and RACE (JSON passages) readers and Megatron's row builder for
 * BERT fine-tuning (see task_data.h). */
#include "app/tasks/task_data.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int task_kind_parse(const char *name, task_kind *kind) {
    if (!strcmp(name, "MNLI")) *kind = TASK_MNLI;
    else if (!strcmp(name, "RACE")) *kind = TASK_RACE;
    else return -1;
    return 0;
}

/* Python's str.isspace for ASCII, as re's \s and str.strip see it */
static int is_space(char ch) { return ch == ' ' || (ch >= '\t' && ch <= '\r') || ch == '\x1c' || ch == '\x1d' || ch == '\x1e' || ch == '\x1f'; }

void task_clean_text(char *text) {
    size_t out = 0;
    for (size_t i = 0; text[i]; i++) {
        if (is_space(text[i])) {  /* a run of whitespace (newlines included) -> one space */
            text[out++] = ' ';
            while (text[i + 1] && is_space(text[i + 1])) i++;
        } else {
            text[out++] = text[i];
        }
    }
    text[out] = '\0';
    for (int pass = 0; pass < 3; pass++) {  /* str.replace(' . ', '. '), left to right */
        size_t w = 0;
        for (size_t r = 0; text[r];) {
            if (text[r] == ' ' && text[r + 1] == '.' && text[r + 2] == ' ') {
                text[w++] = '.';
                text[w++] = ' ';
                r += 3;
            } else {
                text[w++] = text[r++];
            }
        }
        text[w] = '\0';
    }
}

void task_build_row(const int32_t *a, size_t a_len, const int32_t *b, size_t b_len, int seq_length,
                    int cls_id, int sep_id, int pad_id, int32_t *ids, int32_t *types, int32_t *paddings) {
    size_t T = (size_t)seq_length, n = 0;
    /* the untrimmed row: [CLS] a [SEP] (b), written while it fits */
#define PUT(id, type)                 \
    do {                              \
        if (n < T) {                  \
            ids[n] = (id);            \
            types[n] = (type);        \
            paddings[n] = 1;          \
        }                             \
        n++;                          \
    } while (0)
    PUT(cls_id, 0);
    for (size_t i = 0; i < a_len; i++) PUT(a[i], 0);
    PUT(sep_id, 0);
    if (b)
        for (size_t i = 0; i < b_len; i++) PUT(b[i], 1);
#undef PUT
    int trimmed = n >= T;
    if (trimmed) n = T - 1;
    if (b || trimmed) {
        ids[n] = sep_id;
        types[n] = b ? 1 : 0;
        paddings[n] = 1;
        n++;
    }
    for (; n < T; n++) {
        ids[n] = pad_id;
        types[n] = pad_id;
        paddings[n] = 0;
    }
}

/* ---- growing the dataset ---- */

typedef struct loader {
    task_dataset *d;
    int64_t capacity;
    tokenizer *tok;
    int32_t *a, *b;
    size_t a_len, a_cap, b_len, b_cap;
    char *err;
    size_t errlen;
} loader;

static int fail(loader *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(loader *l, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(l->err, l->errlen, fmt, ap);
    va_end(ap);
    return -1;
}

/* room for one more sample; returns its index or -1 */
static int64_t add_sample(loader *l) {
    task_dataset *d = l->d;
    if (d->count == l->capacity) {
        int64_t cap = l->capacity ? 2 * l->capacity : 64;
        size_t row = (size_t)d->rows_per_sample * (size_t)d->seq_length * sizeof(int32_t);
        int32_t *ids = realloc(d->ids, row * (size_t)cap);
        if (ids) d->ids = ids;
        int32_t *types = realloc(d->types, row * (size_t)cap);
        if (types) d->types = types;
        int32_t *paddings = realloc(d->paddings, row * (size_t)cap);
        if (paddings) d->paddings = paddings;
        int32_t *labels = realloc(d->labels, sizeof(int32_t) * (size_t)cap);
        if (labels) d->labels = labels;
        int64_t *uids = realloc(d->uids, sizeof(int64_t) * (size_t)cap);
        if (uids) d->uids = uids;
        if (!ids || !types || !paddings || !labels || !uids) return -1;
        l->capacity = cap;
    }
    return d->count++;
}

static size_t row_offset(const task_dataset *d, int64_t sample, int row) {
    return ((size_t)sample * (size_t)d->rows_per_sample + (size_t)row) * (size_t)d->seq_length;
}

/* tokenizer.tokenize(text) into *ids (length *len) */
static int tokenize(loader *l, const char *text, int32_t **ids, size_t *len, size_t *cap, const char *where) {
    *len = 0;
    if (tokenizer_encode(l->tok, text, strlen(text), ids, len, cap))
        return fail(l, "%s: cannot tokenize: %s", where, tokenizer_last_error(l->tok));
    return 0;
}

static void put_row(loader *l, int64_t sample, int row, int with_b) {
    task_dataset *d = l->d;
    size_t at = row_offset(d, sample, row);
    task_build_row(l->a, l->a_len, with_b ? l->b : NULL, l->b_len, d->seq_length, tokenizer_cls(l->tok),
                   tokenizer_sep(l->tok), tokenizer_pad(l->tok), d->ids + at, d->types + at, d->paddings + at);
}

/* ---- MNLI ---- */

static char *strip(char *s) {
    while (*s && is_space(*s)) s++;
    size_t n = strlen(s);
    while (n > 0 && is_space(s[n - 1])) s[--n] = '\0';
    return s;
}

static const char *const mnli_labels[TASK_MNLI_CLASSES] = {"contradiction", "entailment", "neutral"};

static int mnli_file(loader *l, const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return fail(l, "%s: cannot open the MNLI file: %s", path, strerror(errno));
    char *line = NULL;
    size_t cap = 0;
    ssize_t got;
    long line_no = 0;
    int is_test = 0, status = 0;
    enum { MAX_COLUMNS = 64 };
    char *col[MAX_COLUMNS];
    while (status == 0 && (got = getline(&line, &cap, f)) >= 0) {
        line_no++;
        char *row = strip(line);
        int n = 0;
        for (char *p = row;; n++) {
            if (n == MAX_COLUMNS) break;
            col[n] = p;
            char *tab = strchr(p, '\t');
            if (!tab) { n++; break; }
            *tab = '\0';
            p = tab + 1;
        }
        if (n == MAX_COLUMNS) { status = fail(l, "%s:%ld: more than %d tab-separated columns", path, line_no, MAX_COLUMNS - 1); break; }
        if (line_no == 1) {  /* the header: 10 columns for a test file */
            is_test = n == 10;
            continue;
        }
        if (n < 10) {
            status = fail(l, "%s:%ld: %d tab-separated column%s, MNLI rows have at least 10 (index, ..., sentence1 in column 8, sentence2 in 9, label last)",
                          path, line_no, n, n == 1 ? "" : "s");
            break;
        }
        char *uid_text = strip(col[0]), *end = NULL;
        errno = 0;
        long long uid = strtoll(uid_text, &end, 10);
        if (!*uid_text || *end || errno || uid < 0) {
            status = fail(l, "%s:%ld: column 0 '%s' is not a non-negative integer id", path, line_no, uid_text);
            break;
        }
        const char *label_text = is_test ? "contradiction" : strip(col[n - 1]);
        int label = -1;
        for (int k = 0; k < TASK_MNLI_CLASSES; k++)
            if (!strcmp(label_text, mnli_labels[k])) label = k;
        if (label < 0) {
            status = fail(l, "%s:%ld: label '%s' (last column) is none of contradiction, entailment, neutral", path, line_no, label_text);
            break;
        }
        char *text_a = strip(col[8]), *text_b = strip(col[9]);
        task_clean_text(text_a);
        task_clean_text(text_b);
        if (!*text_a || !*text_b) {
            status = fail(l, "%s:%ld: sentence %d (column %d) is empty", path, line_no, *text_a ? 2 : 1, *text_a ? 9 : 8);
            break;
        }
        char where[1100];
        snprintf(where, sizeof where, "%s:%ld", path, line_no);
        if (tokenize(l, text_a, &l->a, &l->a_len, &l->a_cap, where) ||
            tokenize(l, text_b, &l->b, &l->b_len, &l->b_cap, where)) {
            status = -1;
            break;
        }
        int64_t s = add_sample(l);
        if (s < 0) { status = fail(l, "%s:%ld: out of memory", path, line_no); break; }
        put_row(l, s, 0, 1);
        l->d->labels[s] = label;
        l->d->uids[s] = uid;
    }
    if (status == 0 && ferror(f)) status = fail(l, "%s: read error after line %ld", path, line_no);
    if (status == 0 && line_no == 0) status = fail(l, "%s: empty file (an MNLI TSV starts with a header line)", path);
    free(line);
    fclose(f);
    return status;
}

/* ---- RACE ---- */

/* first_sample: the sample count when the directory began (Megatron's num_samples counts per path) */
static int race_passage(loader *l, const char *where, const char *text, int64_t first_sample) {
    json_error_t jerr;
    json_t *root = json_loads(text, 0, &jerr);
    if (!root) return fail(l, "%s: not JSON: %s (column %d)", where, jerr.text, jerr.column);
    int status = 0;
    json_t *article = json_object_get(root, "article"), *questions = json_object_get(root, "questions"),
           *options = json_object_get(root, "options"), *answers = json_object_get(root, "answers");
    char *context = NULL, *qa = NULL;
    if (!json_is_string(article) || !json_is_array(questions) || !json_is_array(options) || !json_is_array(answers)) {
        status = fail(l, "%s: a RACE passage needs \"article\" (a string) and \"questions\", \"options\", \"answers\" (arrays)", where);
        goto done;
    }
    size_t nq = json_array_size(questions);
    if (json_array_size(answers) != nq || json_array_size(options) != nq) {
        status = fail(l, "%s: %zu questions, %zu answers and %zu option lists: the counts must agree", where, nq,
                      json_array_size(answers), json_array_size(options));
        goto done;
    }
    context = strdup(json_string_value(article));
    if (!context) { status = fail(l, "%s: out of memory", where); goto done; }
    task_clean_text(context);
    if (tokenize(l, context, &l->b, &l->b_len, &l->b_cap, where)) { status = -1; goto done; }
    for (size_t qi = 0; qi < nq; qi++) {
        json_t *question = json_array_get(questions, qi), *answer = json_array_get(answers, qi),
               *choices = json_array_get(options, qi);
        if (!json_is_string(question) || !json_is_string(answer) || !json_is_array(choices)) {
            status = fail(l, "%s: question %zu: the question and answer must be strings, the options an array", where, qi);
            goto done;
        }
        const char *letter = json_string_value(answer);
        int label = (int)(unsigned char)letter[0] - 'A';
        if (strlen(letter) != 1 || label < 0 || label >= TASK_RACE_CHOICES) {
            status = fail(l, "%s: question %zu: answer '%s' is not one of A, B, C, D", where, qi, letter);
            goto done;
        }
        if (json_array_size(choices) != TASK_RACE_CHOICES) {
            status = fail(l, "%s: question %zu: %zu options, RACE has %d", where, qi, json_array_size(choices), TASK_RACE_CHOICES);
            goto done;
        }
        int64_t s = add_sample(l);
        if (s < 0) { status = fail(l, "%s: out of memory", where); goto done; }
        l->d->labels[s] = label;
        l->d->uids[s] = s - first_sample;  /* Megatron's num_samples: the path's running sample count */
        const char *q = json_string_value(question);
        for (int ci = 0; ci < TASK_RACE_CHOICES; ci++) {
            json_t *choice = json_array_get(choices, (size_t)ci);
            if (!json_is_string(choice)) {
                status = fail(l, "%s: question %zu: option %d is not a string", where, qi, ci);
                goto done;
            }
            const char *c = json_string_value(choice);
            size_t qlen = strlen(q), clen = strlen(c), blanks = 0;
            for (const char *p = q; *p; p++) blanks += *p == '_';
            free(qa);
            qa = malloc(qlen + (blanks ? blanks * clen : clen + 1) + 1);
            if (!qa) { status = fail(l, "%s: out of memory", where); goto done; }
            size_t w = 0;
            if (blanks) {  /* question.replace("_", choice) */
                for (const char *p = q; *p; p++) {
                    if (*p == '_') { memcpy(qa + w, c, clen); w += clen; }
                    else qa[w++] = *p;
                }
            } else {      /* " ".join([question, choice]) */
                memcpy(qa, q, qlen);
                qa[qlen] = ' ';
                memcpy(qa + qlen + 1, c, clen);
                w = qlen + 1 + clen;
            }
            qa[w] = '\0';
            task_clean_text(qa);
            if (tokenize(l, qa, &l->a, &l->a_len, &l->a_cap, where)) { status = -1; goto done; }
            if (l->a_len > TASK_RACE_MAX_QA_LENGTH) l->a_len = TASK_RACE_MAX_QA_LENGTH;
            put_row(l, s, ci, 1);
        }
    }
done:
    free(context);
    free(qa);
    json_decref(root);
    return status;
}

static int compare_names(const void *x, const void *y) { return strcmp(*(char *const *)x, *(char *const *)y); }

static int race_directory(loader *l, const char *dir_path) {
    DIR *dir = opendir(dir_path);
    if (!dir) return fail(l, "%s: cannot open the RACE directory (of *.txt files): %s", dir_path, strerror(errno));
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    int status = 0;
    while ((e = readdir(dir))) {
        size_t len = strlen(e->d_name);
        if (len < 4 || strcmp(e->d_name + len - 4, ".txt") || e->d_name[0] == '.') continue;  /* glob's *.txt */
        if (n == cap) {
            char **grown = realloc(names, sizeof(char *) * (cap = cap ? 2 * cap : 16));
            if (!grown) { status = fail(l, "%s: out of memory", dir_path); break; }
            names = grown;
        }
        if (!(names[n] = strdup(e->d_name))) { status = fail(l, "%s: out of memory", dir_path); break; }
        n++;
    }
    closedir(dir);
    if (status == 0 && n == 0) status = fail(l, "%s: no *.txt file (RACE reads every DIR/*.txt)", dir_path);
    if (n) qsort(names, n, sizeof *names, compare_names);
    int64_t first_sample = l->d->count;
    for (size_t i = 0; i < n && status == 0; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir_path, names[i]);
        FILE *f = fopen(path, "r");
        if (!f) { status = fail(l, "%s: cannot open: %s", path, strerror(errno)); break; }
        char *line = NULL;
        size_t line_cap = 0;
        long line_no = 0;
        while (status == 0 && getline(&line, &line_cap, f) >= 0) {
            line_no++;
            char where[4200];
            snprintf(where, sizeof where, "%s:%ld", path, line_no);
            status = race_passage(l, where, line, first_sample);
        }
        free(line);
        fclose(f);
    }
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
    return status;
}

int task_dataset_load(task_kind kind, const char *const *paths, int n_paths, tokenizer *tok,
                      int seq_length, task_dataset *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    out->kind = kind;
    out->seq_length = seq_length;
    out->rows_per_sample = kind == TASK_RACE ? TASK_RACE_CHOICES : 1;
    loader l = {.d = out, .tok = tok, .err = err, .errlen = errlen};
    int status = 0;
    if (seq_length < 3) status = fail(&l, "--seq-length %d: a task row needs at least 3 tokens ([CLS] [SEP] [SEP])", seq_length);
    else if (tokenizer_cls(tok) < 0 || tokenizer_sep(tok) < 0 || tokenizer_pad(tok) < 0)
        status = fail(&l, "tokenizer %s has no [CLS]/[SEP]/[PAD]: the tasks need a BERT WordPiece tokenizer", tokenizer_type(tok));
    for (int i = 0; i < n_paths && status == 0; i++)
        status = kind == TASK_MNLI ? mnli_file(&l, paths[i]) : race_directory(&l, paths[i]);
    if (status == 0 && out->count == 0) status = fail(&l, "%s: no sample", n_paths ? paths[0] : "(no path)");
    free(l.a);
    free(l.b);
    if (status) task_dataset_free(out);
    return status;
}

void task_dataset_free(task_dataset *d) {
    free(d->ids);
    free(d->types);
    free(d->paddings);
    free(d->labels);
    free(d->uids);
    d->ids = d->types = d->paddings = d->labels = NULL;
    d->uids = NULL;
    d->count = 0;
}
