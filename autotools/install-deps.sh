#!/bin/sh
# Install the Debian/Ubuntu packages this project builds and tests with (needs root or sudo).
# MPICH, parallel HDF5 for MPICH, OpenBLAS (CPU backend), PAPI, the autotools,
# and Slurm + munge for the job tests. The CUDA toolkit and NCCL are not Debian packages here:
# ./configure finds them under /usr/local/cuda (or --with-cuda=DIR) when they are installed.
set -e
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends \
    build-essential pkg-config autoconf automake libtool make gawk \
    mpich libmpich-dev libhdf5-mpich-dev hdf5-tools \
    libopenblas-dev libpapi-dev libpcre2-dev libutf8proc-dev libjansson-dev zlib1g-dev python3 \
    slurm-wlm munge >/dev/null
$SUDO apt-get install -y -qq --no-install-recommends gnuplot-nox >/dev/null   # perf/harness plots (PNG)
# the generation server (HTTP), SentencePiece tokenizers (Llama 2), and the fuzz targets (clang's libFuzzer)
$SUDO apt-get install -y -qq --no-install-recommends libmicrohttpd-dev libcurl4-openssl-dev libsentencepiece-dev clang libfuzzer-14-dev >/dev/null
# spm_train / spm_encode: the tests train a small SentencePiece model and take its expected ids from the CLI
$SUDO apt-get install -y -qq --no-install-recommends sentencepiece >/dev/null
# numpy: the independent Megatron-Core reference of the data tests (RandomState shuffles)
$SUDO apt-get install -y -qq --no-install-recommends python3-numpy >/dev/null
# checkpoint and corpus checksums (XXH3)
$SUDO apt-get install -y -qq --no-install-recommends libxxhash-dev >/dev/null
# MD5 of dataset descriptions (Megatron's index cache file names): OpenSSL's libcrypto
$SUDO apt-get install -y -qq --no-install-recommends libssl-dev >/dev/null
echo "install-deps: packages installed"
