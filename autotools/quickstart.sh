#!/bin/sh
# quickstart.sh: from a fresh clone to a trained GPT. Installs the dependencies (apt-get),
# bootstraps, configures, builds, turns the bundled Shakespeare text into JSONL, preprocesses it
# with the GPT-2 tokenizer into a parallel-HDF5 corpus (MPI), and trains a small GPT on it with
# several MPI ranks on the CPU backend, printing the falling loss. NP chooses the rank count.
set -e
cd "$(dirname "$0")/.."
./autotools/install-deps.sh
[ -x configure ] || ./autotools/bootstrap
[ -f Makefile ] || ./configure
make -j"$(nproc)"
np=${NP:-4}
mpiexec=$(sed -n 's/^MPIEXEC = //p' Makefile)
mpiexec=${mpiexec:-mpiexec}
export OPENBLAS_NUM_THREADS=1
mkdir -p run/data
if [ ! -f run/data/tinyshakespeare_text_document.h5 ]; then
    # one JSON document per paragraph (speech) of the play text
    python3 -c '
import json, re, sys
text = open("configs/data/tinyshakespeare.txt", encoding="utf-8").read()
with open("run/data/tinyshakespeare.jsonl", "w") as out:
    for doc in re.split(r"\n\s*\n", text):
        if doc.strip():
            out.write(json.dumps({"text": doc.strip() + "\n"}) + "\n")
'
    "$mpiexec" -n 2 app/preprocess_data --input run/data/tinyshakespeare.jsonl \
        --output-prefix run/data/tinyshakespeare --tokenizer-type GPT2BPETokenizer \
        --vocab-file configs/tokenizers/gpt2/vocab.json --merge-file configs/tokenizers/gpt2/merges.txt \
        --append-eod --workers 2
fi
echo "quickstart: training configs/gpt-tiny-shakespeare.args with $np MPI ranks (metrics in run/metrics.jsonl, checkpoint in run/checkpoints)"
"$mpiexec" -n "$np" app/pretrain_gpt --args-file configs/gpt-tiny-shakespeare.args \
    --metrics-file run/metrics.jsonl --save run/checkpoints "$@"
