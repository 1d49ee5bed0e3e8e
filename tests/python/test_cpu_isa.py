"""ferry.cpu_isa(), ferry.supported_isas(), ferry.set_cpu_isa(): the CPU kernels in use and the cap on them (issue 39;
the CLI's --isa and FERRY_ISA do the same)."""
import pytest

import ferry


def test_lists_the_isas_and_caps_them():
    isas = ferry.supported_isas()
    assert isas[0] == "scalar"
    assert set(isas) <= {"scalar", "avx2", "avx512", "amx"}
    before = ferry.cpu_isa()
    assert before in isas
    try:
        ferry.set_cpu_isa("scalar")
        assert ferry.cpu_isa() == "scalar"
        ferry.set_cpu_isa(isas[-1])
        assert ferry.cpu_isa() == isas[-1]
    finally:
        ferry.set_cpu_isa(before)


def test_refuses_unknown_and_missing_isas():
    with pytest.raises(ferry.InvalidValueError, match="unknown isa"):
        ferry.set_cpu_isa("neon")
    for isa in ("avx2", "avx512", "amx"):
        if isa not in ferry.supported_isas():
            with pytest.raises(ferry.InvalidValueError, match="not available"):
                ferry.set_cpu_isa(isa)
