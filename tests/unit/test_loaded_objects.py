"""What the object cache says about files it cannot use, and how explanations read it."""

from __future__ import annotations

from livesym.addr.kinds import ElfVaddr
from livesym.records import Reason
from livesym.symbolize.explain import explain_elf_vaddr
from livesym.symbolize.objects import ObjectCache
from tests.support.elfbuild import Spec, build


def test_damaged_elf_is_marked_damaged_and_explained_as_not_elf(tmp_path):
    path = tmp_path / "damaged"
    path.write_bytes(build(Spec()).data[:40])  # magic and class, then the header ends
    obj = ObjectCache().load(path)
    assert obj.image is None and obj.damaged and not obj.not_elf
    assert explain_elf_vaddr(obj, ElfVaddr(0x1000)).reason is Reason.NOT_ELF


def test_data_file_is_not_elf_and_not_damaged(tmp_path):
    path = tmp_path / "data"
    path.write_bytes(b"locale data, not an object\n")
    obj = ObjectCache().load(path)
    assert obj.not_elf and not obj.damaged
    assert explain_elf_vaddr(obj, ElfVaddr(0x1000)).reason is Reason.NOT_ELF


def test_missing_file_is_unavailable(tmp_path):
    obj = ObjectCache().load(tmp_path / "gone")
    assert not obj.not_elf and not obj.damaged
    expl = explain_elf_vaddr(obj, ElfVaddr(0x1000))
    assert expl.reason is Reason.FILE_UNAVAILABLE and "no such file" in expl.detail
