"""`labkit export k8s`: one file per kind in apply order, never over a file labkit did not write."""

from __future__ import annotations

import pytest
import yaml

from labkit.cli import main
from labkit.k8s.commands import EXPORT_TARGETS
from labkit.k8s.export import MARKER
from labkit.k8s.manifests import KINDS


def _fails_with_one_line(capsys, argv: list[str], text: str) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("labkit: error: ") and text in err, err


def test_export_writes_one_file_per_kind_in_apply_order(tmp_path, capsys):
    out = tmp_path / "lab"
    assert main(["export", "k8s", "--preset", "case-study", "-o", str(out), "--time-scale", "1008"]) == 0
    assert "wrote 9 files" in capsys.readouterr().out
    names = sorted(p.name for p in out.iterdir())
    assert names == ["00-nodes.yaml", "01-hypernodes.yaml", "02-scheduler-configmap.yaml", "03-namespaces.yaml",
                     "04-resourcequotas.yaml", "05-limitranges.yaml", "06-priorityclasses.yaml", "07-queues.yaml",
                     "08-vcjobs.yaml"]
    for name in names:
        text = (out / name).read_text()
        assert text.startswith(f"{MARKER} (labkit export k8s --preset case-study --time-scale 1008)")
        kinds = {doc["kind"] for doc in yaml.load_all(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))}
        assert len(kinds) == 1 and KINDS.index(kinds.pop()) == int(name[:2])


def test_export_reads_a_scenario_file_and_stdin(tmp_path, monkeypatch, capsys):
    from io import StringIO

    from labkit import spec

    path = tmp_path / "frag.yaml"
    path.write_text(spec.dump(spec.preset("fragmentation")))
    assert main(["export", "k8s", str(path), "-o", str(tmp_path / "a")]) == 0
    monkeypatch.setattr("sys.stdin", StringIO(path.read_text()))
    assert main(["export", "k8s", "-", "-o", str(tmp_path / "b")]) == 0
    assert (tmp_path / "a" / "08-vcjobs.yaml").read_text().split("\n", 1)[1] == \
        (tmp_path / "b" / "08-vcjobs.yaml").read_text().split("\n", 1)[1]


def test_export_replaces_its_own_files_and_drops_kinds_no_longer_there(tmp_path, capsys):
    out = tmp_path / "lab"
    assert main(["export", "k8s", "--preset", "case-study", "-o", str(out)]) == 0
    (out / "notes.md").write_text("mine\n")
    assert main(["export", "k8s", "--preset", "fragmentation", "-o", str(out)]) == 0
    names = sorted(p.name for p in out.iterdir())
    assert "04-resourcequotas.yaml" not in names and "06-priorityclasses.yaml" not in names
    assert "notes.md" in names and (out / "notes.md").read_text() == "mine\n"


def test_export_refuses_to_overwrite_a_file_it_did_not_write(tmp_path, capsys):
    out = tmp_path / "lab"
    out.mkdir()
    mine = out / "08-vcjobs.yaml"
    mine.write_text("apiVersion: v1\nkind: ConfigMap\n")
    _fails_with_one_line(capsys, ["export", "k8s", "--preset", "fragmentation", "-o", str(out)], "not written by labkit")
    assert mine.read_text() == "apiVersion: v1\nkind: ConfigMap\n"
    assert sorted(p.name for p in out.iterdir()) == ["08-vcjobs.yaml"]  # nothing else written either


@pytest.mark.parametrize(("argv", "text"), [
    (["export", "k8s", "--preset", "nope", "-o", "X"], "unknown preset"),
    (["export", "k8s", "-o", "X"], "give a SCENARIO"),
    (["export", "k8s", "--preset", "fragmentation"], "-o/--output"),
    (["export", "nomad", "--preset", "fragmentation", "-o", "X"], "invalid choice"),
    (["export", "k8s", "--preset", "fragmentation", "-o", "X", "--time-scale", "fast"], "invalid float"),
    (["export", "k8s", "--preset", "fragmentation", "-o", "X", "--time-scale", "0"], "--time-scale: must be > 0"),
])
def test_bad_export_input_is_one_line_and_exit_2(argv, text, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    _fails_with_one_line(capsys, argv, text)
    assert not (tmp_path / "X").exists()


def test_an_output_path_that_is_a_file_is_refused(tmp_path, capsys):
    target = tmp_path / "file"
    target.write_text("x")
    _fails_with_one_line(capsys, ["export", "k8s", "--preset", "fragmentation", "-o", str(target)], "not a folder")


def test_export_targets_are_a_registry():
    assert "k8s" in EXPORT_TARGETS
    help_text, writer = EXPORT_TARGETS["k8s"]
    assert help_text and callable(writer)
