# shellcheck shell=bash
# Packing half of the GPU check: builds benchmarks/gpu/bundle/fathom-bundle.tar.xz from a build
# directory. Sourced by check.sh (not run on its own); it expects check.sh's log/warn/die helpers
# and the variables BUILD_DIR, BUNDLE_DIR, TARBALL, MAX_BUNDLE_MIB, REPO_ROOT and the array
# CLEANUP_DIRS (folders check.sh removes on exit).
#
# Why a bundle: the GPU machine is not Debian, installs nothing and may lack Open MPI, yaml-cpp,
# Catch2 and Eigen, so we bring prebuilt executables plus every non-CUDA shared library they
# need. CUDA libraries (cuBLAS, cuDNN, NCCL, the driver) stay behind: they must match the GPU
# machine's driver and are found there. glibc stays behind too: it cannot be swapped under a
# process, so check.sh compares the machine's glibc with the bundle's highest GLIBC_x.y instead.
#
# Layout of the archive (one top-level folder, fathom-bundle/):
#   bin/          test executables from test_manifest.tsv (and mpirun/orted when Open MPI travels)
#   lib/          libfathom.so* and the non-CUDA, non-glibc libraries, under their SONAMEs
#   openmpi/      Open MPI's plugins (lib/openmpi3), help files (share) and etc (only with libmpi)
#   pmix/         PMIx plugins and help files (only when Open MPI needs libpmix)
#   env.sh        sets LD_LIBRARY_PATH (+ OPAL_*/PMIX_* when Open MPI travels) from its own location
#   manifest.tsv  copy of build/tests/test_manifest.tsv ("name<TAB>labels", labels comma-separated)
#   versions.txt  git rev, date, build type, compilers, glibc requirement, host libraries needed
#   glibc.tsv     highest GLIBC_x.y symbol version each bundled ELF file references
# Nothing depends on the executables' RUNPATH: env.sh puts lib/ first in LD_LIBRARY_PATH, which
# the loader searches before any DT_RUNPATH the build left behind.

# Libraries that must come from the machine that runs the bundle. glibc's pieces are tied to
# that machine's loader; the CUDA ones to its driver (and they are far too large to carry).
_fathom_is_host_lib() {
  case "$1" in
    linux-vdso.so* | linux-gate.so* | ld-linux*.so* | ld64.so*) return 0 ;;
    libc.so* | libm.so* | libmvec.so* | libpthread.so* | libdl.so* | librt.so*) return 0 ;;
    libutil.so* | libresolv.so* | libanl.so* | libBrokenLocale.so*) return 0 ;;
    libcuda.so* | libcudart.so* | libcublas*.so* | libcudnn*.so* | libnccl*.so*) return 0 ;;
    libnvidia*.so* | libnvrtc*.so* | libnvJitLink*.so* | libcufft*.so* | libcurand*.so*) return 0 ;;
    libcusparse*.so* | libcusolver*.so* | libnvToolsExt*.so* | libnvtx*.so*) return 0 ;;
  esac
  return 1
}

# Is this lib one that the GPU machine must supply (CUDA side), as opposed to glibc?
_fathom_is_cuda_lib() {
  case "$1" in
    libcuda.so* | libcudart.so* | libcublas*.so* | libcudnn*.so* | libnccl*.so* | libnvidia*.so* | \
      libnvrtc*.so* | libnvJitLink*.so* | libcufft*.so* | libcurand*.so* | libcusparse*.so* | \
      libcusolver*.so* | libnvToolsExt*.so* | libnvtx*.so*) return 0 ;;
  esac
  return 1
}

_fathom_is_elf() {
  [[ -f "$1" ]] && [[ "$(head -c 4 "$1" 2>/dev/null | od -An -c | tr -d ' \n')" == '177ELF' ]]
}

# Adds the shared libraries that ELF file $1 needs (transitively: ldd reports the whole closure)
# to the global maps _DEPS (soname -> path) and _HOST_NEEDS (CUDA soname -> path or "not found").
# Returns 1 when a library we would have to carry cannot be found.
_fathom_add_deps() {
  local file="$1" line name path rc=0
  while IFS= read -r line; do
    line="${line#"${line%%[![:space:]]*}"}"   # trim leading whitespace
    case "$line" in
      *' => '*)
        name="${line%% => *}"
        path="${line#* => }"
        path="${path%% (*}"
        ;;
      *) continue ;;  # vdso and the loader itself: "name (0x...)" or "/lib64/ld-linux... (0x...)"
    esac
    if _fathom_is_host_lib "$name"; then
      if _fathom_is_cuda_lib "$name" && [[ -z "${_HOST_NEEDS[$name]:-}" ]]; then
        _HOST_NEEDS[$name]="$path"
      fi
      continue
    fi
    if [[ "$path" == "not found" || ! -e "$path" ]]; then
      warn "$(basename "$file") needs $name, which ldd cannot find here"
      rc=1
      continue
    fi
    [[ -n "${_DEPS[$name]:-}" ]] || _DEPS[$name]="$path"
  done < <(LC_ALL=C ldd "$file" 2>/dev/null)
  return $rc
}

# Copies $1 to $2 (following symlinks) and strips it. Stripping a copy keeps the build intact;
# --strip-unneeded keeps the dynamic symbol table and the CUDA fatbin sections.
_fathom_copy_stripped() {
  local src="$1" dst="$2"
  cp -L "$src" "$dst" || return 1
  chmod u+w "$dst"
  if _fathom_is_elf "$dst"; then
    strip --strip-unneeded "$dst" 2>/dev/null || warn "strip failed on $(basename "$dst") (kept unstripped)"
  fi
}

# Writes "relative/path<TAB>highest GLIBC_x.y it references" for every ELF file under $1 to
# $1/glibc.tsv. The GPU machine uses it to tell which bundled library needs a newer glibc than
# it has (such a library, e.g. Debian's libstdc++, can be replaced by the host's own copy).
_fathom_write_glibc_tsv() {
  local root="$1" f v
  find "$root" -type f | sort | while IFS= read -r f; do
    _fathom_is_elf "$f" || continue
    v="$(objdump -T "$f" 2>/dev/null | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/^GLIBC_//' | sort -u -V | tail -n 1)"
    [[ -n "$v" ]] && printf '%s\t%s\n' "${f#"$root"/}" "$v"
  done >"$root/glibc.tsv.part"
  mv "$root/glibc.tsv.part" "$root/glibc.tsv"
}

# Highest version in column 2 of glibc.tsv among paths matching the regex $2.
_fathom_glibc_max() {
  awk -F'\t' -v re="$2" '$1 ~ re {print $2}' "$1/glibc.tsv" | sort -u -V | tail -n 1
}

# Value of a CMakeCache.txt entry ("NAME:TYPE=value").
_fathom_cmake_cache() {
  sed -n "s/^$1:[A-Z]*=//p" "$BUILD_DIR/CMakeCache.txt" 2>/dev/null | head -n 1
}

# Open MPI's plugin dir, help-file dir and etc dir, as this machine's installation reports them.
_fathom_ompi_dirs() {
  local pkglib="" pkgdata="" sysconf=""
  if command -v ompi_info >/dev/null 2>&1; then
    pkglib="$(ompi_info --path pkglibdir 2>/dev/null | sed -n 's/^ *Pkglibdir: *//p' | head -n 1)"
    pkgdata="$(ompi_info --path pkgdatadir 2>/dev/null | sed -n 's/^ *Pkgdatadir: *//p' | head -n 1)"
    sysconf="$(ompi_info --path sysconfdir 2>/dev/null | sed -n 's/^ *Sysconfdir: *//p' | head -n 1)"
  fi
  # Debian's layout, if ompi_info is missing.
  if [[ ! -d "$pkglib" ]]; then
    local d
    for d in /usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi*; do [[ -d "$d" ]] && pkglib="$d"; done
  fi
  [[ -d "$pkgdata" ]] || pkgdata=/usr/share/openmpi
  [[ -d "$sysconf" ]] || sysconf=/etc/openmpi
  printf '%s\n%s\n%s\n' "$pkglib" "$pkgdata" "$sysconf"
}

# An mca-params file that names the original install dir (Debian's PMIx one sets
# mca_base_component_path = /usr/lib/x86_64-linux-gnu/pmix2/lib/pmix) would override env.sh's
# relocation and, where that dir is missing, print a warning in every process: comment such
# lines out in the bundled copy.
_fathom_unpin_conf() {
  local conf="$1" orig="$2"
  [[ -f "$conf" && -n "$orig" ]] || return 0
  sed -i "\\|^[^#].*${orig}|s|^|# (disabled by check.sh --pack: the bundle is relocated) |" "$conf"
}

# The env.sh written into the bundle. It locates itself, so the bundle can be unpacked anywhere.
_fathom_write_env_sh() {
  local out="$1" with_mpi="$2" with_pmix="$3"
  cat >"$out" <<'EOF'
# shellcheck shell=bash
# Source this to run a bundled executable by hand:  . fathom-bundle/env.sh; fathom_core_tests
# The bundle's lib dir comes first in LD_LIBRARY_PATH; the GPU machine's CUDA library dirs go in
# FATHOM_EXTRA_LD_PATH (check.sh finds them) and are appended after it.
FATHOM_BUNDLE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export FATHOM_BUNDLE
export PATH="$FATHOM_BUNDLE/bin${PATH:+:$PATH}"
export LD_LIBRARY_PATH="$FATHOM_BUNDLE/lib${FATHOM_EXTRA_LD_PATH:+:$FATHOM_EXTRA_LD_PATH}"
EOF
  if [[ "$with_mpi" == yes ]]; then
    cat >>"$out" <<'EOF'
# Open MPI is relocated into the bundle: it finds its plugins, help files and mca params through
# these variables instead of its compiled-in /usr paths.
export OPAL_PREFIX="$FATHOM_BUNDLE/openmpi"
export OPAL_EXEC_PREFIX="$FATHOM_BUNDLE/openmpi"
export OPAL_BINDIR="$FATHOM_BUNDLE/bin"
export OPAL_LIBDIR="$FATHOM_BUNDLE/lib"
export OPAL_PKGLIBDIR="$FATHOM_BUNDLE/openmpi/lib/openmpi3"
export OPAL_DATAROOTDIR="$FATHOM_BUNDLE/openmpi/share"
export OPAL_DATADIR="$FATHOM_BUNDLE/openmpi/share"
export OPAL_PKGDATADIR="$FATHOM_BUNDLE/openmpi/share/openmpi"
export OPAL_SYSCONFDIR="$FATHOM_BUNDLE/openmpi/etc"
# GPU machines usually run as root; Open MPI refuses that unless told.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
EOF
  fi
  if [[ "$with_pmix" == yes ]]; then
    cat >>"$out" <<'EOF'
# PMIx (Open MPI's process-management layer) is relocated the same way.
export PMIX_PREFIX="$FATHOM_BUNDLE/pmix"
export PMIX_INSTALL_PREFIX="$FATHOM_BUNDLE/pmix"
export PMIX_LIBDIR="$FATHOM_BUNDLE/lib"
export PMIX_PKGLIBDIR="$FATHOM_BUNDLE/pmix/lib/pmix"
export PMIX_PKGDATADIR="$FATHOM_BUNDLE/pmix/share/pmix"
export PMIX_SYSCONFDIR="$FATHOM_BUNDLE/pmix/etc"
EOF
  fi
}

# fathom_pack: the whole of `check.sh --pack`. Returns non-zero on any failure.
fathom_pack() {
  local manifest="$BUILD_DIR/tests/test_manifest.tsv"
  [[ -d "$BUILD_DIR" ]] || die "build dir '$BUILD_DIR' does not exist (configure and build first: cmake -S . -B build -G Ninja && cmake --build build)"
  [[ -f "$manifest" ]] || die "no $manifest: build the tests first (cmake --build $BUILD_DIR)"
  local tool
  for tool in ldd strip objdump tar xz; do
    command -v "$tool" >/dev/null 2>&1 || die "--pack needs '$tool' on PATH"
  done

  local stage root
  stage="$(mktemp -d "${TMPDIR:-/tmp}/fathom-pack.XXXXXX")" || die "mktemp failed"
  CLEANUP_DIRS+=("$stage")   # removed by check.sh's EXIT trap, also when die() exits early
  root="$stage/fathom-bundle"
  mkdir -p "$root/bin" "$root/lib"

  declare -gA _DEPS=() _HOST_NEEDS=()
  local ok=1 name exe f

  # 1. Executables named in the manifest (comment lines start with '#').
  while IFS=$'\t' read -r name _; do
    [[ -z "$name" || "$name" == \#* ]] && continue
    # The newest of that name: a build folder that outlived a move of the tests keeps the old,
    # stale binary beside the new one (tests/ mirrors the source tree, one folder per layer).
    exe="$(find "$BUILD_DIR" -type f -name "$name" -perm -u+x -printf '%T@ %p\n' 2>/dev/null | sort -nr | head -n 1 |
           cut -d' ' -f2-)"
    if [[ -z "$exe" || ! -x "$exe" ]]; then
      warn "manifest lists $name but no such executable is built in $BUILD_DIR"
      ok=0
      continue
    fi
    _fathom_copy_stripped "$exe" "$root/bin/$name" || ok=0
    _fathom_add_deps "$exe" || ok=0
    if readelf -d "$exe" 2>/dev/null | grep -q '(RPATH)'; then
      # DT_RPATH (unlike DT_RUNPATH) beats LD_LIBRARY_PATH and could pull libs from the build dir.
      warn "$name carries DT_RPATH rather than DT_RUNPATH; the bundle may load libraries from outside it"
    fi
  done <"$manifest"
  cp "$manifest" "$root/manifest.tsv"

  # 2. libfathom itself, even if no executable happens to link it.
  local fathom_lib=""
  for f in "$BUILD_DIR"/libfathom.so*; do
    [[ -e "$f" && ! -L "$f" ]] && fathom_lib="$f"
  done
  if [[ -z "$fathom_lib" ]]; then
    warn "no libfathom.so* in $BUILD_DIR"
    ok=0
  else
    local soname
    soname="$(readelf -d "$fathom_lib" 2>/dev/null | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')"
    [[ -n "${_DEPS[${soname:-libfathom.so}]:-}" ]] || _DEPS[${soname:-libfathom.so}]="$fathom_lib"
    _fathom_add_deps "$fathom_lib" || ok=0
    [[ -n "$soname" && "$soname" != libfathom.so ]] && ln -sf "$soname" "$root/lib/libfathom.so"
  fi

  # 3. Open MPI travels as a relocated installation when anything links libmpi. Its plugins are
  #    dlopen()ed (ldd never sees them), so the plugin dir and the plugins' own libraries come
  #    along; so do mpirun/orted for multi-rank runs, and PMIx's plugins when Open MPI uses PMIx.
  local with_mpi=no with_pmix=no ompi_version=""
  if printf '%s\n' "${!_DEPS[@]}" | grep -q '^libmpi\.so'; then
    with_mpi=yes
    local dirs pkglib pkgdata sysconf
    mapfile -t dirs < <(_fathom_ompi_dirs)
    pkglib="${dirs[0]}" pkgdata="${dirs[1]}" sysconf="${dirs[2]}"
    [[ -d "$pkglib" ]] || die "libmpi is needed but Open MPI's plugin dir was not found"
    mkdir -p "$root/openmpi/lib/openmpi3" "$root/openmpi/share" "$root/openmpi/etc"
    for f in "$pkglib"/*.so; do
      _fathom_copy_stripped "$f" "$root/openmpi/lib/openmpi3/" || ok=0
      # A plugin whose libraries are missing here just fails to load there too: not fatal.
      _fathom_add_deps "$f" || true
    done
    [[ -d "$pkgdata" ]] && cp -rL "$pkgdata" "$root/openmpi/share/openmpi"
    if [[ -d "$sysconf" ]]; then
      cp -rL "$sysconf"/. "$root/openmpi/etc/"
      _fathom_unpin_conf "$root/openmpi/etc/openmpi-mca-params.conf" "$(dirname "$pkglib")"
    fi
    local tool_path
    for tool in orterun orted; do
      tool_path="$(command -v "$tool" 2>/dev/null)" || { warn "Open MPI's $tool not found; multi-rank runs will not work"; continue; }
      _fathom_copy_stripped "$tool_path" "$root/bin/$tool" || ok=0
      _fathom_add_deps "$tool_path" || ok=0
    done
    [[ -e "$root/bin/orterun" ]] && ln -sf orterun "$root/bin/mpirun" && ln -sf orterun "$root/bin/mpiexec"
    ompi_version="$(ompi_info --version 2>/dev/null | head -n 1 | sed 's/^Open MPI v//')"

    if [[ -n "${_DEPS[libpmix.so.2]:-}" ]]; then
      with_pmix=yes
      local pmix_root
      pmix_root="$(cd "$(dirname "$(readlink -f "${_DEPS[libpmix.so.2]}")")/.." && pwd)"
      mkdir -p "$root/pmix/lib/pmix" "$root/pmix/share" "$root/pmix/etc"
      if [[ -d "$pmix_root/lib/pmix" ]]; then
        for f in "$pmix_root"/lib/pmix/*.so; do
          [[ -e "$f" ]] || continue
          _fathom_copy_stripped "$f" "$root/pmix/lib/pmix/" || ok=0
          _fathom_add_deps "$f" || true
        done
      fi
      [[ -d "$pmix_root/share/pmix" ]] && cp -rL "$pmix_root/share/pmix" "$root/pmix/share/pmix"
      if [[ -f "$pmix_root/share/pmix-mca-params.conf" ]]; then
        cp -L "$pmix_root/share/pmix-mca-params.conf" "$root/pmix/etc/"
        _fathom_unpin_conf "$root/pmix/etc/pmix-mca-params.conf" "$pmix_root"
      fi
    fi
  fi

  # 4. Every library collected above, under the name the loader asks for (its SONAME).
  for name in "${!_DEPS[@]}"; do
    _fathom_copy_stripped "${_DEPS[$name]}" "$root/lib/$name" || ok=0
  done

  _fathom_write_env_sh "$root/env.sh" "$with_mpi" "$with_pmix"

  # 5. versions.txt: what was built, by what, and what the running machine must provide.
  local git_rev glibc_req glibc_floor nvcc nvcc_ver cxx host_needs
  git_rev="$(git -C "$REPO_ROOT" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)"
  if [[ -n "$(git -C "$REPO_ROOT" status --porcelain --untracked-files=no 2>/dev/null)" ]]; then
    git_rev="$git_rev-dirty"
  fi
  _fathom_write_glibc_tsv "$root"
  glibc_req="$(_fathom_glibc_max "$root" '.')"
  glibc_floor="$(_fathom_glibc_max "$root" '^(bin/|lib/libfathom|openmpi/|pmix/)')"
  nvcc="$(_fathom_cmake_cache CMAKE_CUDA_COMPILER)"
  [[ -x "$nvcc" ]] || nvcc="$(command -v nvcc 2>/dev/null || echo /usr/local/cuda/bin/nvcc)"
  nvcc_ver="$("$nvcc" --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\), \(V[0-9.]*\).*/\1 (\2)/p')"
  cxx="$(_fathom_cmake_cache CMAKE_CXX_COMPILER)"
  host_needs="$(printf '%s\n' "${!_HOST_NEEDS[@]}" | sort | tr '\n' ' ')"
  {
    echo "git_rev: $git_rev"
    echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo "build_type: $(_fathom_cmake_cache CMAKE_BUILD_TYPE)"
    echo "cuda_architectures: $(_fathom_cmake_cache CMAKE_CUDA_ARCHITECTURES)"
    echo "nvcc: ${nvcc_ver:-not found}"
    echo "cxx: $(${cxx:-c++} --version 2>/dev/null | head -n 1)"
    echo "built_on: $(. /etc/os-release 2>/dev/null && echo "${PRETTY_NAME:-unknown}"), glibc $(getconf GNU_LIBC_VERSION 2>/dev/null | sed 's/^glibc //')"
    echo "glibc_required: ${glibc_req:-unknown}"
    # What the executables, libfathom and Open MPI need; other libraries in lib/ that need more
    # (libstdc++, libgcc_s, ...) can be replaced by the GPU machine's own copies.
    echo "glibc_floor: ${glibc_floor:-unknown}"
    echo "host_libs_needed: ${host_needs% }"
    echo "openmpi: $([[ "$with_mpi" == yes ]] && echo "bundled ${ompi_version}" || echo "not needed")"
  } >"$root/versions.txt"

  [[ $ok == 1 ]] || { warn "packing failed (see above); no bundle written"; return 1; }

  # 6. Compress. Written to a temporary name first, so a failed run never leaves half a tarball.
  mkdir -p "$BUNDLE_DIR"
  rm -f "$TARBALL"
  if ! tar -C "$stage" --owner=0 --group=0 -cf - fathom-bundle | xz -9 -T0 >"$TARBALL.part"; then
    rm -f "$TARBALL.part"
    die "tar/xz failed"
  fi
  mv "$TARBALL.part" "$TARBALL"

  local bytes mib
  bytes="$(stat -c %s "$TARBALL")"
  mib="$(awk -v b="$bytes" 'BEGIN { printf "%.1f", b / 1048576 }')"
  log "bundle: $TARBALL"
  log "  $(find "$root/bin" -type f | wc -l) executables, $(find "$root/lib" -type f | wc -l) libraries, unpacked $(du -sh "$root" | cut -f1), compressed $mib MiB (limit $MAX_BUNDLE_MIB MiB)"
  sed 's/^/  /' "$root/versions.txt"
  if ((bytes > MAX_BUNDLE_MIB * 1048576)); then
    rm -f "$TARBALL"
    die "bundle is $mib MiB, over the $MAX_BUNDLE_MIB MiB limit (the GPU machine receives at most 64 MiB in all); removed it"
  fi
  return 0
}
