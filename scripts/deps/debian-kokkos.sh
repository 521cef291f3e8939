#!/usr/bin/env bash
# debian-kokkos.sh — a newer Kokkos, from Debian's sid / experimental binary packages, usable on Debian 12.
#
#   scripts/deps/debian-kokkos.sh FLAVOUR     prints, as its last line, an env file to source
#
#   FLAVOUR  Kokkos  Kokkos Kernels  backend  C++  packages (Debian version pinned)
#   4.5.1    4.5.1   4.5.1           Serial   17   sid: libtrilinos-kokkos{,-kernels}{-dev,-16.1} 16.1.0-5+b2
#   5.0.2    5.0.2   5.0.2           Serial   20   experimental: libtrilinos-kokkos{,-kernels}{-dev,-17.0} 17.0.0+dfsg-5
#   5.2.2    5.2.2   none            OpenMP   20   sid: libkokkos-dev, libkokkos5.2 5.2.2-2
# Deprecated code as Debian builds it: 4.5.1 has KOKKOS_ENABLE_DEPRECATED_CODE_4, 5.x has _5 (not _4).
#
# The env file sets KOKKOS_VERSION_EXPECTED, KOKKOS_PREFIX, KOKKOS_DIR (its CMake package dir), KOKKOS_INCLUDE,
# KOKKOSKERNELS_DIR (a package config, empty for 5.2.2), KOKKOSKERNELS_INCLUDE and KOKKOS_LINK_FLAGS.
#
# How, and why:
# * apt with a private configuration (lists and archives under the cache; the system's apt setup is
#   untouched), `apt-get download` of the pinned packages, `dpkg -x` into the cache: nothing is installed.
# * The packaged libraries need glibc 2.38+ and a newer libstdc++ than Debian 12's, so sid's runtime
#   (libc6, libstdc++6, libgcc-s1, libgomp1) is extracted too; executables linked with KOKKOS_LINK_FLAGS
#   get sid's loader as their dynamic linker and an RPATH to both trees, so they run directly (ctest).
# * Two packaging problems of libkokkos-dev 5.2.2 are fixed in the extracted copy: KokkosTargets.cmake
#   names the absolute /usr/include/kokkos, and two static archives its CMake files name are not shipped
#   (empty ones are made).
# * Trilinos' KokkosKernelsConfig.cmake includes Trilinos' BLAS/LAPACK package configs (trilinos-dev, a
#   large MPI stack), so a small config stands in for it: the INTERFACE target KokkosKernels::all_libs
#   (Trilinos' name) over the packaged Kokkos Kernels headers. kvcanary uses Kokkos Kernels' headers
#   only, so nothing of the packaged Kokkos Kernels library is lost.
# Cache: $KOKKOS_DEB_HOME (default ~/.cache/kokkos-debian); about 8 MB of packages, fetched once. A second
# run with the same inputs touches neither the network nor the extracted trees (stamp file).
set -euo pipefail
FLAVOUR=${1:?usage: debian-kokkos.sh 4.5.1|5.0.2|5.2.2}
H=${KOKKOS_DEB_HOME:-$HOME/.cache/kokkos-debian}
SETUP_VERSION=1  # bump to re-extract everywhere
MULTIARCH=usr/lib/x86_64-linux-gnu

log() { printf '[debian-kokkos %s] %s\n' "$(date +%T)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

case $FLAVOUR in
  4.5.1) suite=sid; version=40501; trilinos=16.1; deb=16.1.0-5+b2
         packages=(libtrilinos-kokkos-dev libtrilinos-kokkos-$trilinos libtrilinos-kokkos-kernels-dev
                   libtrilinos-kokkos-kernels-$trilinos) ;;
  5.0.2) suite=experimental; version=50002; trilinos=17.0; deb=17.0.0+dfsg-5
         packages=(libtrilinos-kokkos-dev libtrilinos-kokkos-$trilinos libtrilinos-kokkos-kernels-dev
                   libtrilinos-kokkos-kernels-$trilinos) ;;
  5.2.2) suite=sid; version=50202; trilinos=; deb=5.2.2-2; packages=(libkokkos-dev libkokkos5.2) ;;
  *) die "unknown flavour '$FLAVOUR' (4.5.1, 5.0.2 or 5.2.2)" ;;
esac
[ "$(dpkg --print-architecture)" = amd64 ] || die "the packages named here are amd64 ones"

# apt_private SUITE APT-GET-ARGS...: apt-get (or `apt_private SUITE cache ...`: apt-cache) over SUITE only.
apt_private() {
  local suite=$1; shift
  local root=$H/apt/$suite uri keyring=/usr/share/keyrings/debian-archive-keyring.gpg
  mkdir -p "$root/lists/partial" "$root/cache/archives/partial"
  uri=$(awk '/^URIs:/ {u=$2} /^Suites:/ { if (u !~ /security/) {print u; exit} }' \
          /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
  [ -n "$uri" ] || uri=$(awk '$1=="deb" && $0 !~ /security/ {for (i=2;i<=NF;i++) if ($i ~ /^[a-z]+:\/\//) {print $i; exit}}' \
                           /etc/apt/sources.list 2>/dev/null || true)
  [ -n "$uri" ] || die "cannot find the Debian archive URI in the system apt sources"
  echo "deb [signed-by=$keyring] $uri $suite main" > "$root/sources.list"
  local tool=apt-get
  if [ "${1:-}" = cache ]; then tool=apt-cache; shift; fi
  "$tool" -o Dir::Etc::SourceList="$root/sources.list" -o Dir::Etc::SourceParts=/dev/null \
    -o Dir::State::Lists="$root/lists" -o Dir::Cache="$root/cache" -o Dir::State::status=/var/lib/dpkg/status \
    -o APT::Sandbox::User=root -o Acquire::Languages=none "$@"
}

# fetch DIR SUITE PACKAGE...: the packages' .deb files into DIR, once.
fetch() {
  local dir=$1 suite=$2; shift 2
  [ -f "$dir/.complete" ] && return 0
  rm -rf "$dir"; mkdir -p "$dir"
  [ -f "$H/apt/$suite/.updated" ] || { log "apt-get update ($suite, private lists)"; apt_private "$suite" -qq update
                                       touch "$H/apt/$suite/.updated"; }
  log "apt-get download ($suite): $*"
  (cd "$dir" && apt_private "$suite" -qq download "$@") \
    || die "apt-get download from $suite failed (has $suite moved on from the pinned versions? $*)"
  touch "$dir/.complete"
}

# extract DIR DEBS_DIR: dpkg -x every package of DEBS_DIR into DIR, once.
extract() {
  local dir=$1 debs=$2
  [ -f "$dir/.complete" ] && return 0
  rm -rf "$dir"; mkdir -p "$dir"
  for package in "$debs"/*.deb; do dpkg -x "$package" "$dir"; done
  touch "$dir/.complete"
}

debs=$H/debs/$FLAVOUR-$deb root=$H/root/$FLAVOUR-$deb-v$SETUP_VERSION
fetch "$debs" "$suite" "${packages[@]/%/=$deb}"
fetch "$H/debs/sid-runtime" sid libc6 libstdc++6 libgcc-s1 libgomp1
extract "$H/root/sid-runtime" "$H/debs/sid-runtime"
runtime_lib=$H/root/sid-runtime/$MULTIARCH
[ -x "$runtime_lib/ld-linux-x86-64.so.2" ] || die "no sid loader at $runtime_lib/ld-linux-x86-64.so.2"

if [ ! -f "$root/.complete" ]; then
  rm -rf "$root.tmp"; extract "$root.tmp" "$debs"
  kokkos_cmake=$root.tmp/$MULTIARCH/cmake/Kokkos
  # Fix-ups of libkokkos-dev 5.2.2 (no-ops for the Trilinos packages).
  sed -i "s|\"/usr/include/kokkos\"|\"$root/usr/include/kokkos\"|" "$kokkos_cmake/KokkosTargets.cmake"
  for archive in $(grep -ho "lib/x86_64-linux-gnu/lib[a-z_]*\.a" "$kokkos_cmake"/KokkosTargets-*.cmake | sort -u); do
    [ -f "$root.tmp/usr/$archive" ] \
      || { log "fix-up: empty usr/$archive (named by KokkosTargets, not shipped)"; ar rcs "$root.tmp/usr/$archive"; }
  done
  rm -rf "$root"; mv "$root.tmp" "$root"  # the sed above already wrote the final path
fi

kokkos_include=$root/usr/include/kokkos
found=$(sed -n 's/^#define KOKKOS_VERSION \([0-9]*\).*/\1/p' "$kokkos_include/KokkosCore_config.h" | head -n 1)
[ "$found" = "$version" ] || die "the packages hold Kokkos $found, not $version"

kk_dir= kk_include=
if [ -n "$trilinos" ]; then
  kk_include=$root/usr/include/trilinos
  kk_version=$(sed -n 's/^#define KOKKOSKERNELS_VERSION \([0-9]*\).*/\1/p' "$kk_include/KokkosKernels_config.h")
  [ "$kk_version" = "$version" ] || die "the packages hold Kokkos Kernels $kk_version, not $version"
  kk_dir=$root/stub-kokkoskernels
  mkdir -p "$kk_dir"
  cat > "$kk_dir/KokkosKernelsConfig.cmake" <<EOF
# Written by kvcanary's scripts/deps/debian-kokkos.sh: stands in for Trilinos' KokkosKernelsConfig.cmake
# (which needs Trilinos' BLAS/LAPACK configs): Trilinos' target name over the packaged headers.
if(NOT TARGET KokkosKernels::all_libs)
  add_library(KokkosKernels::all_libs INTERFACE IMPORTED)
  set_target_properties(KokkosKernels::all_libs PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "$kk_include" INTERFACE_LINK_LIBRARIES Kokkos::kokkos)
endif()
set(KokkosKernels_VERSION $FLAVOUR)
set(KokkosKernels_FOUND TRUE)
EOF
fi

env_file=$root/kokkos.env
cat > "$env_file" <<EOF
# Written by scripts/deps/debian-kokkos.sh $FLAVOUR
KOKKOS_VERSION_EXPECTED=$FLAVOUR
KOKKOS_PREFIX=$root/usr
KOKKOS_DIR=$root/$MULTIARCH/cmake/Kokkos
KOKKOS_INCLUDE=$kokkos_include
KOKKOSKERNELS_DIR=$kk_dir
KOKKOSKERNELS_INCLUDE=$kk_include
KOKKOS_LINK_FLAGS="-Wl,--allow-shlib-undefined -Wl,--disable-new-dtags -Wl,-rpath,$root/$MULTIARCH:$runtime_lib -Wl,--dynamic-linker=$runtime_lib/ld-linux-x86-64.so.2"
EOF
log "Kokkos $FLAVOUR${trilinos:+ + Kokkos Kernels $FLAVOUR (headers)} at $root"
echo "$env_file"
