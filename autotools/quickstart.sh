#!/bin/sh
# quickstart.sh: from a fresh clone to a trained GPT. Installs the dependencies (apt-get),
# bootstraps, configures, builds, and trains the tiny GPT (configs/gpt-tiny.args) with several
# MPI ranks on the CPU backend, printing the falling loss. Set NP to choose the rank count.
set -e
cd "$(dirname "$0")/.."
./autotools/install-deps.sh
[ -x configure ] || ./autotools/bootstrap
[ -f Makefile ] || ./configure
make -j"$(nproc)"
np=${NP:-4}
mpiexec=$(sed -n 's/^MPIEXEC = //p' Makefile)
mkdir -p run
echo "quickstart: training configs/gpt-tiny.args with $np MPI ranks (metrics in run/metrics.jsonl)"
OPENBLAS_NUM_THREADS=1 "${mpiexec:-mpiexec}" -n "$np" app/pretrain_gpt --args-file configs/gpt-tiny.args \
    --metrics-file run/metrics.jsonl "$@"
