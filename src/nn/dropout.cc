// Dropout at inference (eval mode): the identity, as torch.nn.Dropout in eval().
#include "ferry/nn/dropout.h"

#include "ferry/core/error.h"

namespace ferry::nn {

Value Dropout::forward(const Args& args) {
  if (args.size() == 0) throw Error("forward needs an input (positional 0)", type_name());
  return args[0];
}

}  // namespace ferry::nn
