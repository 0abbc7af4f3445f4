/* task_data.h: the downstream-task data that Megatron's tasks/main.py reads for BERT fine-tuning
 * (tasks/data_utils.py, tasks/glue/mnli.py, tasks/race/data.py), tokenized with the WordPiece
 * tokenizer into fixed-length rows:
 *   MNLI  GLUE TSV files: a header line (10 columns: a test file, every label then
 *         'contradiction'), then one pair a line: column 0 the unique id, 8 sentence 1 (text a),
 *         9 sentence 2 (text b), the last column the label (contradiction 0, entailment 1,
 *         neutral 2); one row [CLS] a [SEP] b [SEP] per sample.
 *   RACE  a directory of *.txt files (read in name order; Megatron's glob order is the file
 *         system's), one JSON passage a line {"article", "questions", "options", "answers"}:
 *         one sample per question with 4 rows [CLS] qa [SEP] article [SEP], qa the question with
 *         '_' replaced by the choice (else question + " " + choice), cut to 128 tokens; label
 *         answer letter - 'A'.
 * Rows follow build_tokens_types_paddings_from_ids: token types 0 up to the first [SEP] and 1
 * after it; over seq_length the row is cut to seq_length - 1 and ends in [SEP]; padding with the
 * pad id (token types too, as Megatron does) and padding mask 0. Bad input is one message naming
 * the file and line. */
#ifndef TASK_DATA_H
#define TASK_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "app/tokenizers/tokenizer.h"

enum { TASK_MNLI_CLASSES = 3, TASK_RACE_CHOICES = 4, TASK_RACE_MAX_QA_LENGTH = 128 };

typedef enum task_kind { TASK_MNLI, TASK_RACE } task_kind;

/* the samples of one split: sample s holds rows_per_sample rows of seq_length tokens from row
 * s x rows_per_sample of ids/types/paddings */
typedef struct task_dataset {
    task_kind kind;
    int seq_length;
    int rows_per_sample;           /* 1 (MNLI) or TASK_RACE_CHOICES */
    int64_t count;                 /* samples */
    int32_t *ids, *types, *paddings;
    int32_t *labels;               /* [count] */
    int64_t *uids;                 /* [count] */
} task_dataset;

/* "MNLI" or "RACE" -> kind; -1 for another name */
int task_kind_parse(const char *name, task_kind *kind);

/* tasks/data_utils.py clean_text, in place: newlines to spaces, runs of whitespace to one space,
 * then " . " -> ". " three times */
void task_clean_text(char *text);

/* build_tokens_types_paddings_from_ids into ids/types/paddings [seq_length]; b NULL: no text b */
void task_build_row(const int32_t *a, size_t a_len, const int32_t *b, size_t b_len, int seq_length,
                    int cls_id, int sep_id, int pad_id, int32_t *ids, int32_t *types, int32_t *paddings);

/* reads the files (MNLI) or directories (RACE) of paths[0..n_paths) in order into *out;
 * returns 0, or -1 with "path:line: problem" in err (nothing left allocated) */
int task_dataset_load(task_kind kind, const char *const *paths, int n_paths, tokenizer *tok,
                      int seq_length, task_dataset *out, char *err, size_t errlen);
void task_dataset_free(task_dataset *d);

#endif
