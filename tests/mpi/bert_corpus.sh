# tests/mpi/bert_corpus.sh: a small sentence-split WordPiece corpus for the BERT training tests,
# sourced after tests/lib.sh: bert_corpus NAME DOCS writes $WORK/NAME_text_sentence.h5 from
# documents of 2 to 6 sentences of 2 to 24 words of tests/data/wordpiece-vocab.txt (several
# split into pieces, so whole-word masking matters), through preprocess_data --split-sentences
# with --tokenizer-type TOKENIZER (default BertWordPieceLowerCase; T5 takes BertWordPieceCase)
# ($PREPROCESS_DATA when set: the GPU machine's packed one; else the build's).
BERT_VOCAB="$top_srcdir/tests/data/wordpiece-vocab.txt"
bert_corpus() {  # bert_corpus NAME DOCS [TOKENIZER]
    awk -v docs="$2" 'BEGIN {
        n = split("the quick brown fox jumped over the lazy dog jumps unaffable tokenizer dataset " \
                  "resume alpha hello world data token cafe naive tokenizing is it a don", w, " ");
        for (d = 0; d < docs; d++) {
            ns = 2 + (d * 7) % 5; line = "{\"text\": \"";
            for (s = 0; s < ns; s++) {
                len = 2 + (d * 13 + s * 5) % 23;
                for (k = 0; k < len; k++) line = line (k ? " " : "") w[1 + (d * 31 + s * 17 + k * 7 + k * k) % n];
                line = line (s + 1 < ns ? ". " : ".") }
            print line "\"}" } }' > "$WORK/$1.jsonl"
    "$MPIEXEC" -n 1 "${PREPROCESS_DATA:-$top_builddir/app/preprocess_data}" --input "$WORK/$1.jsonl" --output-prefix "$WORK/$1" \
        --tokenizer-type "${3:-BertWordPieceLowerCase}" --vocab-file "$BERT_VOCAB" --split-sentences >"$WORK/pre.out" 2>&1
    ok $? "corpus $1: $2 documents split into sentences (${3:-BertWordPieceLowerCase})"
}
