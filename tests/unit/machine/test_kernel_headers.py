"""Kernel header search order and the merged tree bcc is given, on fixture trees."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.machine import kernel

RELEASE = "6.18.44-fc-v657"


def make_tree(root: Path, *files: str) -> Path:
    for name in files:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"/* {name} */\n")
    return root


def debian_headers(usr_src: Path, version: str, flavour: str = "cloud-amd64") -> Path:
    make_tree(
        usr_src / f"linux-headers-{version}-common",
        "include/linux/kconfig.h",
        "include/linux/sched.h",
        "arch/x86/include/asm/ptrace.h",
        "arch/x86/include/uapi/asm/bpf_perf_event.h",
    )
    return make_tree(
        usr_src / f"linux-headers-{version}-{flavour}",
        "include/generated/autoconf.h",
        "include/config/auto.conf",
        "arch/x86/include/generated/asm/rwonce.h",
        ".config",
    )


def find(tmp_path: Path, environ: dict[str, str] | None = None) -> kernel.HeadersChoice:
    return kernel.find_kernel_headers(
        RELEASE,
        environ or {},
        modules_dir=tmp_path / "lib/modules",
        sys_kernel=tmp_path / "sys/kernel",
        usr_src=tmp_path / "usr/src",
    )


def test_environment_variable_comes_first(tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "mine", "include/linux/kconfig.h")
    make_tree(tmp_path / f"lib/modules/{RELEASE}/build", "include/linux/kconfig.h")
    choice = find(tmp_path, {"BCC_KERNEL_SOURCE": str(tree)})
    assert (choice.source, choice.path) == ("BCC_KERNEL_SOURCE", tree)


def test_environment_variable_pointing_nowhere_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(kernel.HeadersNotFound, match=r"has no include/linux/kconfig\.h: point it at"):
        find(tmp_path, {"BCC_KERNEL_SOURCE": str(tmp_path / "nothing")})


def test_modules_build_of_the_running_kernel(tmp_path: Path) -> None:
    make_tree(tmp_path / f"lib/modules/{RELEASE}/source", "include/linux/kconfig.h")
    (tmp_path / f"lib/modules/{RELEASE}/build").mkdir()
    make_tree(tmp_path / "sys/kernel", "kheaders.tar.xz")
    assert find(tmp_path).source == "modules-build"


def test_kheaders_archive_before_foreign_headers(tmp_path: Path) -> None:
    make_tree(tmp_path / "sys/kernel", "kheaders.tar.xz")
    debian_headers(tmp_path / "usr/src", "6.1.0-57")
    assert find(tmp_path).source == "kheaders"


def test_nearest_debian_headers_last(tmp_path: Path) -> None:
    usr_src = tmp_path / "usr/src"
    debian_headers(usr_src, "5.10.0-30")
    nearest = debian_headers(usr_src, "6.1.0-57")
    debian_headers(usr_src, "6.1.0-40")
    choice = find(tmp_path)
    assert (choice.source, choice.path) == ("debian-nearest", nearest)
    assert "linux-headers-6.1.0-57-common" in choice.detail


def test_ubuntu_common_dir_without_suffix(tmp_path: Path) -> None:
    usr_src = tmp_path / "usr/src"
    make_tree(usr_src / "linux-headers-6.8.0-31", "include/linux/kconfig.h")
    generic = make_tree(usr_src / "linux-headers-6.8.0-31-generic", "include/generated/autoconf.h")
    assert find(tmp_path).path == generic


def test_nothing_installed_says_what_to_install(tmp_path: Path) -> None:
    with pytest.raises(kernel.HeadersNotFound) as error:
        find(tmp_path)
    message = str(error.value)
    assert "apt-get install linux-headers-$(uname -r)" in message
    assert "\n" not in message


def test_merged_tree_has_both_halves_and_sets_bcc_kernel_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # setenv first, so that monkeypatch restores the variable prepare_headers() sets in this process.
    monkeypatch.setenv("BCC_KERNEL_SOURCE", "")
    monkeypatch.delenv("BCC_KERNEL_SOURCE")
    debian_headers(tmp_path / "usr/src", "6.1.0-57")
    choice = kernel.prepare_headers(find(tmp_path), tmp_path / "state")
    merged = choice.bcc_kernel_source
    assert merged is not None
    for name in (
        "include/linux/kconfig.h",
        "include/generated/autoconf.h",
        "arch/x86/include/asm/ptrace.h",
        "arch/x86/include/generated/asm/rwonce.h",
        "include/config/auto.conf",
    ):
        assert (merged / name).is_file(), name
    assert kernel.os.environ["BCC_KERNEL_SOURCE"] == str(merged)
    # Preparing again reuses the tree.
    assert kernel.prepare_headers(find(tmp_path), tmp_path / "state").bcc_kernel_source == merged


def test_version_tuple() -> None:
    assert kernel.version_tuple("6.1.0-57-cloud-amd64") == (6, 1, 0)
    assert kernel.version_tuple("6.18.44-fc-v657") == (6, 18, 44)
    assert kernel.version_tuple("6.8") == (6, 8, 0)
    assert kernel.version_tuple("weird") == ()
