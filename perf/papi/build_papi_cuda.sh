#!/bin/sh
# build_papi_cuda.sh: build PAPI with the cuda component (GPU counters through CUPTI's profiler
# API) and the host components (perf_event, perf_event_uncore; libpfm4 bundled), against the CUDA
# toolkit, and install it into a prefix; `./configure --with-papi=PREFIX` then links pretrain_gpt
# against it with an rpath (so ldd, and ../shared/device/pack.sh, find it).
# Debian's libpapi is built without the cuda component.
#
# Which source: PAPI's GitHub repository at a pinned commit (PAPI 7.3.0.0 in development, Aug
# 2026), read from a local clone or snapshot (--git; here the one `fetch github:icl-utk-edu/papi`
# brought), plus perf/papi/papi-cuda-one-pass-sets.patch. Not the released 7.2.0 (Debian's
# 7.2.0-2, which /work/papi-cuda was built from): 7.2.0 returns a stale first range on every
# PAPI_read after the first (fixed upstream in May 2026, "Clear counterDataImage"), so per-phase
# counts would be wrong; and both 7.2.0 and upstream check at PAPI_add_event only that each metric
# fits one replay pass alone, while PAPI_start configures all of a GPU's metrics for one pass: a
# set whose metrics fit one pass each but not together (on an H200: DRAM bytes read + written + SM
# active cycles + HMMA pipe cycles + sm__ops_path_tensor_src_bf16_dst_fp32 needs 2 passes) fails
# at PAPI_start with PAPI_EMISC ("Unknown error code") and keeps the GPU marked busy, so no later
# PAPI_start on it works either. The patch checks the pass count of the set at PAPI_add_event
# (PAPI_EMULPASS for the event that does not fit with the ones before it: the set stays usable),
# gives the GPU back when PAPI_start fails, and sets the counter data image options' struct size.
# (perf/papi/nvpw_passes shows the pass counts on this machine, without a GPU.)
# Only the library, libsde and the utilities are built (TESTS= empty).
#
# Usage: perf/papi/build_papi_cuda.sh [--prefix DIR] [--src DIR] [--git DIR] [--commit SHA]
#                                     [--cuda DIR] [--jobs N] [--debug]
#   defaults: --prefix /work/papi-cuda-new  --src /work/papi-src  --git /work/.mirror/icl-utk-edu+papi/repo
#             --commit 48842c66dc2907899a50efcdcfd2ed7ca1c7e525  --cuda /usr/local/cuda  --jobs nproc
#   --debug: configure --with-debug (PAPI_DEBUG=SUBSTRATE then prints the cuda component's CUPTI and
#            perfworks calls and their errors; slower: for diagnosis only, into its own prefix)
# Needs: git, gcc, make, patch; the CUDA toolkit with CUPTI (cupti.h, nvperf_host.h, libcupti.so,
# libnvperf_host.so); its nvml.h, or perf/papi/nvml_shim/nvml.h stands in (at run time the
# component also loads the driver's libnvidia-ml.so.1). Idempotent: a finished install of the same source, patch and options is left
# as is (delete PREFIX to rebuild). Not part of CI (minutes of compiling).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
prefix=/work/papi-cuda-new
src=/work/papi-src
git_dir=/work/.mirror/icl-utk-edu+papi/repo
commit=48842c66dc2907899a50efcdcfd2ed7ca1c7e525
cuda=/usr/local/cuda
jobs=$(nproc 2>/dev/null || echo 2)
debug=
while [ $# -gt 0 ]; do
    case $1 in
    --prefix) prefix=$2; shift 2 ;;
    --src) src=$2; shift 2 ;;
    --git) git_dir=$2; shift 2 ;;
    --commit) commit=$2; shift 2 ;;
    --cuda) cuda=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --debug) debug=--with-debug; shift ;;
    *) echo "build_papi_cuda.sh: unknown argument '$1' (see the header of $0)" >&2; exit 2 ;;
    esac
done
say() { echo "build_papi_cuda.sh: $*"; }
die() { echo "build_papi_cuda.sh: error: $*" >&2; exit 1; }
patch_file=$here/papi-cuda-one-pass-sets.patch

# the CUDA toolkit: headers the cuda component compiles against, libraries it dlopens at run time
for f in cupti.h cupti_profiler_target.h nvperf_host.h; do
    [ -f "$cuda/include/$f" ] || [ -f "$cuda/extras/CUPTI/include/$f" ] ||
        die "no $f under $cuda/include or $cuda/extras/CUPTI/include: is the CUDA toolkit with CUPTI there? (--cuda DIR)"
done
for f in libcupti.so libnvperf_host.so libcudart.so; do
    [ -e "$cuda/lib64/$f" ] || [ -e "$cuda/extras/CUPTI/lib64/$f" ] || die "no $f under $cuda/lib64 or $cuda/extras/CUPTI/lib64"
done
for tool in git gcc make patch; do
    command -v $tool >/dev/null || die "$tool is not installed (apt-get install git build-essential patch)"
done

# what this build is made of: a prefix built from anything else is not reused
identity="papi $commit patch $(cat "$patch_file" "$here/nvml_shim/nvml.h" | sha256sum | cut -c1-16) cuda $cuda ${debug:-release}"
stamp=$prefix/.build_papi_cuda.components
if [ -f "$prefix/lib/libpapi.so" ] && grep -q '^Name: *cuda ' "$stamp" 2>/dev/null; then
    if grep -qxF "# $identity" "$stamp"; then
        say "PAPI with the cuda component is already installed in $prefix (delete it to rebuild)"
        exit 0
    fi
    other=$(sed -n 's/^# //p' "$stamp" | head -1)
    die "$prefix holds another PAPI build (${other:-PAPI 7.2.0 from Debian's source, by an earlier version of this script}); delete it or choose another --prefix"
fi

# 1. the source: the pinned commit of the local clone, exported, then patched
[ -d "$git_dir" ] || die "no git repository at $git_dir: clone https://github.com/icl-utk-edu/papi (or fetch github:icl-utk-edu/papi) and pass --git DIR"
git --git-dir="$git_dir" cat-file -e "$commit^{commit}" 2>/dev/null || die "$git_dir has no commit $commit (--commit SHA)"
tree=$src/papi-git-$(echo "$commit" | cut -c1-12)${debug:+-debug}
if [ ! -f "$tree/.patched" ]; then
    rm -rf "$tree" && mkdir -p "$tree"
    git --git-dir="$git_dir" archive "$commit" | tar -x -C "$tree"
    (cd "$tree" && patch -p1 --quiet < "$patch_file") || die "$patch_file does not apply to $commit"
    # the cuda component includes nvml.h (three functions it finds with dlsym at run time)
    [ -f "$cuda/include/nvml.h" ] || cp "$here/nvml_shim/nvml.h" "$tree/src/nvml.h"
    sha256sum "$patch_file" > "$tree/.patched"
fi
dir=$tree/src
say "source: $dir (commit $commit + $(basename "$patch_file"))"

# 2. configure: the cuda component finds the toolkit through PAPI_CUDA_ROOT (compile and run time)
cd "$dir"
export PAPI_CUDA_ROOT="$cuda"
configured="./configure --prefix=$prefix --with-components=cuda $debug"
if ! grep -qsxF "$configured" configure.out || [ ! -f Makefile ]; then
    [ -f Makefile ] && { make clobber >/dev/null 2>&1 || true; }
    echo "$configured" > configure.out
    # shellcheck disable=SC2086 # $debug is empty or one word
    ./configure --prefix="$prefix" --with-components="cuda" --with-perf-events $debug \
        --with-shared-lib=yes --with-static-lib=no --with-shlib-tools >> configure.out 2>&1 ||
        { tail -20 configure.out; die "configure failed (whole output: $dir/configure.out)"; }
fi

# 3. build (the bundled libpfm4, the library, libsde, the utilities; no tests) and install
say "make -j$jobs (a few minutes)"
make -j"$jobs" TESTS= > make.out 2>&1 || { tail -30 make.out; die "make failed (whole output: $dir/make.out)"; }
make install > install.out 2>&1 || { tail -20 install.out; die "make install failed ($dir/install.out)"; }
{
    echo "# $identity"
    LD_LIBRARY_PATH="$prefix/lib" "$prefix/bin/papi_component_avail" 2>&1 | sed -n '/Compiled-in components/,/Active components/p'
} > "$stamp.new"
grep -q '^Name: *cuda ' "$stamp.new" || die "the installed PAPI has no cuda component (papi_component_avail: $stamp.new)"
mv "$stamp.new" "$stamp"
say "installed PAPI ($commit, patched) in $prefix; compiled-in components:"
grep -E 'Name:|Disabled' "$stamp" | sed 's/^/  /'
say "next: ./configure --with-papi=$prefix; at run time PAPI_CUDA_ROOT=$cuda (where libcupti and libnvperf_host are)"
