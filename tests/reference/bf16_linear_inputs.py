"""Makes a transformers model compute as ferry's bf16 kernels do on CPUs with AVX512_BF16: every nn.Linear's input
rounded to bf16 (nearest-even) and back to f32 before the f32 matmul. Used by hf_logits.py and hf_t5_reference.py
for their bf16-rounded-input references."""
import torch


def round_linear_inputs_to_bf16(model):
    """Rounds the input of every nn.Linear to bf16 (nearest-even) and back to f32, as ferry's bf16 kernels do."""
    def hook(module, args):
        return (args[0].to(torch.bfloat16).to(torch.float32),) + tuple(args[1:])
    for m in model.modules():
        if isinstance(m, torch.nn.Linear):
            m.register_forward_pre_hook(hook)
    return model
