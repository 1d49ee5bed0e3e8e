"""Makes a transformers model compute as ferry's bf16 kernels do on CPUs with AVX512_BF16: every nn.Linear's input
rounded to bf16 (nearest-even) and back to f32 before the f32 matmul. Used by hf_logits.py and hf_t5_reference.py
for their bf16-rounded-input references."""
import contextlib

import torch


def round_linear_inputs_to_bf16(model):
    """Rounds the input of every nn.Linear to bf16 (nearest-even) and back to f32, as ferry's bf16 kernels do."""
    def hook(module, args):
        return (args[0].to(torch.bfloat16).to(torch.float32),) + tuple(args[1:])
    for m in model.modules():
        if isinstance(m, torch.nn.Linear):
            m.register_forward_pre_hook(hook)
    return model


@contextlib.contextmanager
def bf16_functional_linear_inputs():
    """Within: every torch.nn.functional.linear call rounds an f32 input to bf16 and back first. Mixture-of-experts
    models call F.linear directly (their routers, and their experts stacked in 3-D parameters), where no nn.Linear
    pre-hook sees the input; ferry's bf16 kernels round those inputs as well."""
    original = torch.nn.functional.linear

    def linear(x, weight, bias=None):
        if x.dtype == torch.float32:
            x = x.to(torch.bfloat16).to(torch.float32)
        return original(x, weight, bias)

    torch.nn.functional.linear = linear
    try:
        yield
    finally:
        torch.nn.functional.linear = original
