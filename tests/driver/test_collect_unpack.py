"""The collect stage unpacks each host's fetched results.tgz itself (the role leaves it, collect_unpack:
false): results land beside the host's facts, the archive goes, and an archive that would write outside the
host's folder is refused, named, and kept."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

from pav.stages.collect import unpack


def archive(path: Path, members: dict[str, bytes]) -> None:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def test_results_land_beside_the_facts_and_the_archive_goes(tmp_path: Path) -> None:
    host = tmp_path / "hosts" / "node-0"
    host.mkdir(parents=True)
    (host / "facts.json").write_text("{}")
    archive(host / "results.tgz", {"results/torch_gloo_allreduce/rank0.json": b'{"ok": true}'})
    assert unpack(host) is None
    assert (host / "results" / "torch_gloo_allreduce" / "rank0.json").read_text() == '{"ok": true}'
    assert not (host / "results.tgz").exists() and (host / "facts.json").exists()


def test_a_host_without_an_archive_is_left_alone(tmp_path: Path) -> None:
    assert unpack(tmp_path) is None
    assert list(tmp_path.iterdir()) == []


def test_an_archive_that_escapes_the_host_folder_is_refused_and_kept(tmp_path: Path) -> None:
    host = tmp_path / "hosts" / "node-0"
    host.mkdir(parents=True)
    archive(host / "results.tgz", {"../../../escaped.txt": b"x"})
    error = unpack(host)
    assert error is not None and str(host / "results.tgz") in error and "stay in the archive" in error
    assert not (tmp_path / "escaped.txt").exists() and not (tmp_path.parent / "escaped.txt").exists()
    assert (host / "results.tgz").exists()
