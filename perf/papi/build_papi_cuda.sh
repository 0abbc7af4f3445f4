#!/bin/sh
# build_papi_cuda.sh: build PAPI 7 with the cuda component (GPU counters through CUPTI's profiler
# API) and the host components (perf_event, perf_event_uncore; libpfm4 bundled) from Debian's
# source, against the CUDA toolkit, and install it into a prefix; `./configure --with-papi=PREFIX`
# then links pretrain_gpt against it with an rpath (so ldd, and ../shared/device/pack.sh, find it).
# Debian's libpapi is built without the cuda component.
#
# Which source: bookworm's papi 7.0.0 has the old cuda component, which calls perfworks'
# NVPW_MetricsContext API that CUDA 13 no longer has (it does not compile); PAPI 7.2.0 (Debian
# unstable's papi 7.2.0-2) uses the MetricsEvaluator API and builds against CUDA 13. So a deb-src
# entry for unstable on the same Debian mirror goes into a private apt state under --src (the
# system's apt sources are left alone) and `apt-get source papi=7.2.0-2` fetches it; where the
# mirror serves only the upstream tarball of that version (a partial mirror), that tarball is
# fetched and checked against the SHA-256 in the (signed) Sources index instead.
# Only the library, libsde and the utilities are built (TESTS= empty): PAPI's own cuda component
# tests call cuCtxCreate with CUDA 12's arguments and do not compile against CUDA 13.
#
# Usage: perf/papi/build_papi_cuda.sh [--prefix DIR] [--src DIR] [--cuda DIR] [--jobs N]
#   defaults: --prefix /work/papi-cuda  --src /work/papi-src  --cuda /usr/local/cuda  --jobs nproc
# Needs: Debian 12 with its mirror reachable, gcc and make (installed with apt when missing: root
# or sudo), the CUDA toolkit with CUPTI (cupti.h, nvperf_host.h, libcupti.so, libnvperf_host.so).
# Idempotent: each step is skipped when its result is there; a finished install is left as is
# (delete PREFIX to rebuild). Not part of CI (downloads, and minutes of compiling).
set -eu

prefix=/work/papi-cuda
src=/work/papi-src
cuda=/usr/local/cuda
jobs=$(nproc 2>/dev/null || echo 2)
version=7.2.0-2
while [ $# -gt 0 ]; do
    case $1 in
    --prefix) prefix=$2; shift 2 ;;
    --src) src=$2; shift 2 ;;
    --cuda) cuda=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    *) echo "build_papi_cuda.sh: unknown argument '$1' (see the header of $0)" >&2; exit 2 ;;
    esac
done
say() { echo "build_papi_cuda.sh: $*"; }
die() { echo "build_papi_cuda.sh: error: $*" >&2; exit 1; }
as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

# the CUDA toolkit: headers the cuda component compiles against, libraries it dlopens at run time
for f in cupti.h cupti_profiler_target.h nvperf_host.h; do
    [ -f "$cuda/include/$f" ] || [ -f "$cuda/extras/CUPTI/include/$f" ] ||
        die "no $f under $cuda/include or $cuda/extras/CUPTI/include: is the CUDA toolkit with CUPTI there? (--cuda DIR)"
done
for f in libcupti.so libnvperf_host.so libcudart.so; do
    [ -e "$cuda/lib64/$f" ] || [ -e "$cuda/extras/CUPTI/lib64/$f" ] || die "no $f under $cuda/lib64 or $cuda/extras/CUPTI/lib64"
done

stamp=$prefix/.build_papi_cuda.components
if [ -f "$prefix/lib/libpapi.so" ] && grep -q '^Name: *cuda ' "$stamp" 2>/dev/null; then
    say "PAPI with the cuda component is already installed in $prefix (delete it to rebuild)"
    exit 0
fi

# 1. the source, from the Debian mirror the system's apt sources name
mkdir -p "$src"
dir=$(ls -d "$src"/papi-7.2.0/src "$src"/papi-papi-7-2-0-t/src 2>/dev/null | head -1 || true)
if [ -z "$dir" ]; then
    command -v gcc >/dev/null && command -v make >/dev/null && command -v dpkg-source >/dev/null ||
        { as_root apt-get update -q && as_root apt-get install -y -q build-essential dpkg-dev; }
    mirror=$(grep -rhs '^URIs:' /etc/apt/sources.list.d/*.sources | awk '$2 ~ /\/debian\/?$/ {print $2; exit}')
    [ -n "$mirror" ] || mirror=$(awk '$1 == "deb" && $2 ~ /\/debian\/?$/ {print $2; exit}' /etc/apt/sources.list 2>/dev/null)
    [ -n "$mirror" ] || die "no Debian mirror in /etc/apt/sources.list*"
    apt_dir=$src/apt
    mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial"
    echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror unstable main" > "$apt_dir/sources.list"
    set -- -o Dir::Etc::SourceList="$apt_dir/sources.list" -o Dir::Etc::SourceParts=/dev/null \
        -o Dir::State::Lists="$apt_dir/lists" -o Dir::Cache="$apt_dir/cache" -o APT::Sandbox::User="$(id -un)"
    say "deb-src $mirror unstable (private apt state in $apt_dir); apt-get source papi=$version"
    apt-get "$@" update -q >/dev/null || die "apt-get update with $apt_dir/sources.list failed"
    if ! (cd "$src" && apt-get "$@" source papi="$version" > apt-source.out 2>&1); then
        # a partial mirror: the upstream tarball only, checked against the Sources index
        orig=papi_${version%-*}.orig.tar.gz
        stanza=$(apt-cache "$@" showsrc papi | awk -v RS= -v v="$version" '$0 ~ "\nVersion: " v "\n" {print; exit}')
        pooldir=$(echo "$stanza" | awk '/^Directory:/ {print $2; exit}')
        sha=$(echo "$stanza" | awk -v f="$orig" '/^Checksums-Sha256:/ {s=1; next} s && $3 == f {print $1; exit}')
        [ -n "$pooldir" ] && [ -n "$sha" ] || die "the mirror's Sources index has no papi $version"
        say "the mirror has no papi_$version.dsc; fetching $orig (sha256 $sha)"
        [ -f "$src/$orig" ] && echo "$sha  $src/$orig" | sha256sum -c --quiet 2>/dev/null ||
            /usr/lib/apt/apt-helper download-file "$mirror/$pooldir/$orig" "$src/$orig" "SHA256:$sha" ||
            die "downloading $mirror/$pooldir/$orig failed"
        tar -C "$src" -xzf "$src/$orig"
    fi
    dir=$(ls -d "$src"/papi-7.2.0/src "$src"/papi-papi-7-2-0-t/src 2>/dev/null | head -1 || true)
    [ -n "$dir" ] || die "no PAPI 7.2.0 source tree under $src after unpacking"
fi
say "source: $dir"

# 2. configure: the cuda component finds the toolkit through PAPI_CUDA_ROOT (compile and run time)
cd "$dir"
export PAPI_CUDA_ROOT="$cuda"
if ! grep -qsx "./configure --prefix=$prefix --with-components=cuda" configure.out || [ ! -f Makefile ]; then
    [ -f Makefile ] && { make clobber >/dev/null 2>&1 || true; }
    echo "./configure --prefix=$prefix --with-components=cuda" > configure.out
    ./configure --prefix="$prefix" --with-components="cuda" --with-perf-events \
        --with-shared-lib=yes --with-static-lib=no --with-shlib-tools >> configure.out 2>&1 ||
        { tail -20 configure.out; die "configure failed (whole output: $dir/configure.out)"; }
fi

# 3. build (the bundled libpfm4, the library, libsde, the utilities; no tests) and install
say "make -j$jobs (a few minutes)"
make -j"$jobs" TESTS= > make.out 2>&1 || { tail -30 make.out; die "make failed (whole output: $dir/make.out)"; }
make install > install.out 2>&1 || { tail -20 install.out; die "make install failed ($dir/install.out)"; }
LD_LIBRARY_PATH="$prefix/lib" "$prefix/bin/papi_component_avail" 2>&1 | sed -n '/Compiled-in components/,/Active components/p' > "$stamp.new"
grep -q '^Name: *cuda ' "$stamp.new" || die "the installed PAPI has no cuda component (papi_component_avail: $stamp.new)"
mv "$stamp.new" "$stamp"
say "installed PAPI $version's library and utilities in $prefix; compiled-in components:"
grep -E 'Name:|Disabled' "$stamp" | sed 's/^/  /'
say "next: ./configure --with-papi=$prefix; at run time PAPI_CUDA_ROOT=$cuda (where libcupti and libnvperf_host are)"
