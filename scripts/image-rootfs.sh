#!/usr/bin/env bash
# Assemble the agent image's root filesystem in ROOT from the build stage (see Dockerfile): only what the agent runs.
# Usage, inside the build stage as root: image-rootfs.sh ROOT
#
# What goes in:
#   - the venv /opt/schedwatch (the project and its pip dependencies; pip and setuptools already removed);
#   - Python 3.11 from Debian (the interpreter and its standard library, less what the agent never imports: the
#     test suite, lib2to3, pydoc's data, distutils, GUI, terminal and database modules; see PYTHON_UNUSED);
#   - bcc's Python package from python3-bpfcc, and glibc (less gconv: Python's codecs do not use iconv);
#   - every shared library that any executable or library above needs, found by the dynamic loader itself
#     (ld.so --list): libbcc and its LLVM/clang, CPython's extension modules, grpcio's, ...; except that Z3 and ICU,
#     which LLVM loads but bcc never calls, are replaced by stubs (STUBBED, below);
#   - compiled modules (.pyc) only for what the agent imports (below);
#   - the few programs that run: /bin/sh, tar and xz (bcc calls them to unpack /sys/kernel/kheaders.tar.xz),
#     ldconfig (Python's ctypes.util.find_library asks it; agent/memory.py tunes glibc's malloc through it);
#   - the CA bundle, root's passwd/group entries, os-release and a dpkg status of the Debian packages the files
#     come from (for image scanners).
# Nothing else: no shell tools, no apt, dpkg, perl, documentation or locales.
set -euo pipefail
root="${1:?usage: image-rootfs.sh ROOT}"
python=python3.11
loader="$(readlink -f /lib64/ld-linux-x86-64.so.2)"

# Libraries replaced by stubs (see below): each is loaded, never called.
STUBBED=(libz3.so.4 libicuuc.so.72)

# Standard-library parts the agent never imports (paths under /usr/lib/python3.11).
PYTHON_UNUSED=(
    test lib2to3 pydoc_data distutils ensurepip idlelib tkinter turtledemo turtle.py
    sqlite3 dbm curses unittest
    lib-dynload/_test\* lib-dynload/_ctypes_test\* lib-dynload/xxlimited\* lib-dynload/_xxtestfuzz\*
    lib-dynload/_sqlite3\* lib-dynload/_dbm\* lib-dynload/_gdbm\* lib-dynload/_curses\* lib-dynload/readline\*
    lib-dynload/audioop\* lib-dynload/ossaudiodev\* lib-dynload/nis\* lib-dynload/_crypt\*
)

list="$(mktemp)"
# Paths as the running system sees them: directories canonical (merged /usr), the last component kept as it is,
# so that a symlink stays a symlink.
add() {
    local path dir
    for path in "$@"; do
        [ -e "$path" ] || [ -L "$path" ] || { echo "image-rootfs: missing $path" >&2; exit 1; }
        dir="$(readlink -f "$(dirname "$path")")"
        echo "${dir%/}/$(basename "$path")" >>"$list"
    done
}
# A package's files (not directories), less documentation.
add_package() {
    local path
    dpkg-query -L "$1" | while read -r path; do
        [ -d "$path" ] && [ ! -L "$path" ] && continue
        case "$path" in
            /usr/share/doc/* | /usr/share/man/* | /usr/share/lintian/* | /usr/share/locale/* | */gconv/*) continue ;;
        esac
        add "$path"
    done
}

# Python: the venv, the interpreter, its standard library, bcc's package.
find /opt/schedwatch -not -type d >>"$list"
add "/usr/bin/$python" "/etc/$python/sitecustomize.py"
find "/usr/lib/$python" -not -type d >>"$list"
find /usr/lib/python3/dist-packages/bcc /usr/lib/python3/dist-packages/bcc-*.egg-info -not -type d >>"$list"
add_package libc6
add_package libbpfcc
add /usr/bin/sh /usr/bin/dash /usr/bin/tar /usr/bin/xz /usr/sbin/ldconfig /etc/ld.so.conf /etc/ld.so.conf.d
add /etc/ssl/certs/ca-certificates.crt /usr/lib/ssl/cert.pem /usr/lib/ssl/certs /etc/os-release /usr/lib/os-release

unused="$(mktemp)"
for part in "${PYTHON_UNUSED[@]}"; do
    # shellcheck disable=SC2086  # the glob is meant
    for path in /usr/lib/$python/$part; do
        echo "$path"
    done
done >"$unused"
# Drop each unused part with everything under it, and the compiled modules of the unused top-level files.
awk 'NR == FNR { drop[$0] = 1; next }
     { keep = 1
       for (d in drop) if ($0 == d || index($0, d "/") == 1) keep = 0
       if (keep) print }' "$unused" "$list" >"$list.kept"
grep -v -E "/usr/lib/$python/__pycache__/turtle\." "$list.kept" >"$list"

# Every shared library that any ELF file above needs, as the dynamic loader resolves it (LD_LIBRARY_PATH as set).
elf_files() {
    local path
    while read -r path; do
        if [ -f "$path" ] && [ ! -L "$path" ] && head -c 4 "$path" | grep -q "ELF"; then echo "$path"; fi
    done
}
needed_libraries() {
    local path
    while read -r path; do
        "$loader" --list "$path" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' || true
    done | sort -u
}
elf_files <"$list" >"$list.elf"
libraries="$(mktemp)"
needed_libraries <"$list.elf" >"$libraries"

# Stubs: a library that something above must load but that schedwatch never calls into is replaced by a small
# library of the same soname whose functions (only those that its users import) print which was called and abort.
# libLLVM-14 links Z3 (23 MB) for the clang static analyzer's optional solver, and libxml2 (for llvm-mt's Windows
# manifests) which links ICU (33 MB with its data) for encodings that iconv lacks: bcc uses neither.
stubs=/tmp/image-stubs
mkdir -p "$stubs"
for soname in "${STUBBED[@]}"; do
    real="$(grep "/$soname\$" "$libraries")" || { echo "image-rootfs: nothing needs $soname: no stub" >&2; exit 1; }
    users="$(cat "$list.elf" "$libraries" | while read -r path; do
        if readelf -d "$path" 2>/dev/null | grep -q "(NEEDED).*\[$soname\]"; then echo "$path"; fi
    done)"
    # shellcheck disable=SC2086  # one path a word
    nm -D --undefined-only --format=posix $users | awk '{ sub(/@.*/, "", $1); print $1 }' | sort -u >"$stubs/wanted"
    nm -D --defined-only --format=posix "$real" | awk '{ sub(/@.*/, "", $1); print $1, $2 }' | sort -u \
        | join "$stubs/wanted" - >"$stubs/symbols"
    if awk '$2 !~ /^[TWi]$/' "$stubs/symbols" | grep -q .; then
        echo "image-rootfs: $soname exports data that its users need, cannot stub: $(awk '$2 !~ /^[TWi]$/' "$stubs/symbols")" >&2
        exit 1
    fi
    {
        echo "/* Stands in for $soname in the schedwatch image (scripts/image-rootfs.sh), for: $users */"
        echo "#include <stdio.h>"
        echo "#include <stdlib.h>"
        echo "static void stubbed(const char *name) {"
        echo "    fprintf(stderr, \"schedwatch image: %s() of $soname was called, but the image has only a stub of it\\n\", name);"
        echo "    abort();"
        echo "}"
        awk '{ printf "void %s(void) { stubbed(\"%s\"); }\n", $1, $1 }' "$stubs/symbols"
    } >"$stubs/$soname.c"
    gcc -shared -fPIC -O2 -s -Wl,-soname,"$soname" -o "$stubs/$soname" "$stubs/$soname.c"
    echo "stub $soname ($(wc -l <"$stubs/symbols") functions) for $users instead of $(readlink -f "$real")"
    echo "$(dirname "$real")/$soname" >>"$stubs/places"
done
[ ${#STUBBED[@]} -eq 0 ] || LD_LIBRARY_PATH="$stubs" needed_libraries <"$list.elf" >"$libraries"

# The libraries: the file the loader finds and the real file behind it; a stub in place of the library it replaces.
while read -r library; do
    case "$library" in "$stubs"/*) continue ;; esac
    add "$library"
    real="$(readlink -f "$library")"
    [ "$real" = "$(readlink -f "$(dirname "$library")")/$(basename "$library")" ] || add "$real"
done <"$libraries"
# The loader itself, under the name every executable asks for.
add /lib64/ld-linux-x86-64.so.2 "$loader"

mkdir -p "$root"
for dir in bin lib sbin lib64; do
    mkdir -p "$root/usr/$dir"
    ln -s "usr/$dir" "$root/$dir"
done
sort -u "$list" | sed "s|^/||" | tar -C / --no-recursion -cf - -T - | tar -C "$root" --keep-directory-symlink -xf -
[ ! -f "$stubs/places" ] || while read -r place; do
    install -m 0644 "$stubs/$(basename "$place")" "$root$place"
done <"$stubs/places"

# The loader's cache (ldconfig -p reads it), the system's few files, scratch space.
ldconfig -r "$root"
mkdir -p "$root/tmp" "$root/run/schedwatch" "$root/root" "$root/var/lib/dpkg" "$root/proc" "$root/sys" "$root/dev"
chmod 1777 "$root/tmp"
echo "root:x:0:0:root:/root:/bin/sh" >"$root/etc/passwd"
echo "root:x:0:" >"$root/etc/group"

# Which Debian packages the files came from, as dpkg knows them (image scanners read this).
# dpkg knows the paths as packaged, before /usr was merged: ask for both spellings.
sort -u "$list" | sed -E 'p; s#^/usr/(bin|sbin|lib|lib64)/#/\1/#' | sort -u | { xargs dpkg-query -S 2>/dev/null || true; } \
    | grep -v '^diversion' | cut -d: -f1 | tr ',' '\n' | sed 's/ //g' | sort -u | xargs dpkg-query -s >"$root/var/lib/dpkg/status"
# The tree alone must import bcc and every module of the agent, and run the command. The compiled modules
# (__pycache__) of what that imports are kept: the root filesystem is read-only at run time, so Python could not
# cache them. The others' are dropped (14 MB: pygments' lexers, most of pyroute2, ...); such a module, if it is
# ever imported, is compiled in memory. Besides the agent's modules: what `schedwatch run` imports later, as
# `python3 -v` showed in the image (reading the BPF sources as package resources, encoding a host name).
RUNTIME_IMPORTS="importlib.readers importlib.resources.readers zipfile encodings.idna stringprep"
chroot "$root" /opt/schedwatch/bin/python3 -c "if True:
    import importlib, os, pkgutil, sys
    import agent, bcc
    for name in '$RUNTIME_IMPORTS'.split():
        importlib.import_module(name)
    for module in pkgutil.walk_packages(agent.__path__, 'agent.'):
        if module.name != 'agent.__main__':
            importlib.import_module(module.name)
    for module in list(sys.modules.values()):
        if getattr(module, '__cached__', None) and os.path.exists(module.__cached__):
            print(os.path.realpath(module.__cached__))
" | sed "s|^|$root|" | sort -u >"$list.imported"
find "$root" -name '*.pyc' | sort | comm -23 - "$list.imported" | xargs rm -f
find "$root" -type d -name __pycache__ -empty -delete
echo "compiled modules kept: $(wc -l <"$list.imported") of what importing the agent loads"
chroot "$root" /opt/schedwatch/bin/schedwatch --help >/dev/null

echo "rootfs: $(du -sh "$root" | cut -f1) in $(find "$root" -not -type d | wc -l) files," \
    "from $(grep -c '^Package:' "$root/var/lib/dpkg/status") Debian packages"
