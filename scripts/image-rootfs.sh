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
#     (ld.so --list): libbcc and its LLVM/clang, CPython's extension modules, grpcio's, ...;
#   - the few programs that run: /bin/sh, tar and xz (bcc calls them to unpack /sys/kernel/kheaders.tar.xz),
#     ldconfig (Python's ctypes.util.find_library asks it; agent/memory.py tunes glibc's malloc through it);
#   - the CA bundle, root's passwd/group entries, os-release and a dpkg status of the Debian packages the files
#     come from (for image scanners).
# Nothing else: no shell tools, no apt, dpkg, perl, documentation or locales.
set -euo pipefail
root="${1:?usage: image-rootfs.sh ROOT}"
python=python3.11
loader="$(readlink -f /lib64/ld-linux-x86-64.so.2)"

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

# Every shared library that any ELF file above needs, as the dynamic loader resolves it: the file it finds and
# the real file behind it.
libraries="$(mktemp)"
while read -r path; do
    [ -f "$path" ] && [ ! -L "$path" ] || continue
    head -c 4 "$path" | grep -q "ELF" || continue
    "$loader" --list "$path" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' || true
done <"$list" | sort -u >"$libraries"
while read -r library; do
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
sort -u "$list" | tar -C / --no-recursion -cf - -T - | tar -C "$root" --keep-directory-symlink -xf -

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
echo "rootfs: $(du -sh "$root" | cut -f1) in $(find "$root" -not -type d | wc -l) files," \
    "from $(grep -c '^Package:' "$root/var/lib/dpkg/status") Debian packages"
