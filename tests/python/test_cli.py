"""`python -m ferry ...` runs the ferry command."""

import subprocess
import sys

import ferry.__main__ as cli


def test_python_m_ferry_forwards_to_the_cli(folders):
    if cli.find_cli() is None:
        import pytest

        pytest.skip("no ferry command next to this package or on PATH")
    out = subprocess.run([sys.executable, "-m", "ferry", "tokenize", "-m", folders["llama"], "Paris"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    ids = [int(x) for x in out.stdout.replace(",", " ").split() if x.lstrip("-").isdigit()]
    assert ids == ferry_ids(folders)
    bad = subprocess.run([sys.executable, "-m", "ferry", "generate", "--no-such-flag"], capture_output=True,
                         timeout=120)
    assert bad.returncode == 2  # the command's usage error, passed through


def ferry_ids(folders):
    import ferry

    return ferry.AutoTokenizer.from_pretrained(folders["llama"]).encode("Paris")
