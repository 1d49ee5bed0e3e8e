// The malformed-file table: every way a checkpoint, index or offload folder can be broken or hostile, each with
// the error text a user must see. Every case must throw ferry::Error (never crash, never load), of kind InvalidValue
// (a corrupt or hostile file) unless the case says NotFound (a file it needs is not there).
#include <gtest/gtest.h>
#include <unistd.h>

#include <functional>

#include "ferry/io/checkpoint.h"
#include "ferry/io/offload.h"
#include "ferry/io/safetensors.h"
#include "ferry/io/torch_bin.h"
#include "io/io_test_util.h"
#include "support/torch_bin_writer.h"

namespace ferry::io {
namespace {

using iotest::safetensors_bytes;
using iotest::TempDir;
using iotest::write_bytes;
using testing::PickleWriter;

struct Case {
  const char* name;
  std::function<void(const TempDir&)> run;  // writes the file(s) and loads them
  const char* expected;                      // substring of the error message
  ErrorKind kind = ErrorKind::InvalidValue;  // NotFound where a file the checkpoint needs is not there
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

// --- safetensors --------------------------------------------------------------------------------------------------

std::function<void(const TempDir&)> st_raw(std::string bytes) {
  return [bytes](const TempDir& d) {
    write_bytes(d / "m.safetensors", bytes);
    SafetensorsFile::open(d / "m.safetensors");
  };
}
std::function<void(const TempDir&)> st(std::string header, std::string data = std::string(24, '\0')) {
  return st_raw(safetensors_bytes(header, data));
}
std::string le64(uint64_t n) {
  std::string s;
  for (int i = 0; i < 8; ++i) s.push_back(static_cast<char>((n >> (8 * i)) & 0xFF));
  return s;
}
const std::string kA = R"("a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]})";

// --- torch .bin -----------------------------------------------------------------------------------------------------

// A .bin whose data.pkl is `pickle`, with one 24-byte float storage "0".
std::function<void(const TempDir&)> bin_pickle(std::string pickle, std::string storage_key = "0",
                                               std::size_t storage_bytes = 24) {
  return [=](const TempDir& d) {
    testing::write_zip(d / "m.bin", {{"archive/data.pkl", pickle},
                                     {"archive/data/" + storage_key, std::string(storage_bytes, '\0')}});
    load_torch_bin(d / "m.bin");
  };
}
// A well-formed pickle around one tensor expression written by `tensor`.
std::string state_dict_with(const std::function<void(PickleWriter&)>& tensor) {
  PickleWriter w;
  w.proto(2).empty_dict().mark().str("w");
  tensor(w);
  w.setitems().stop();
  return w.bytes();
}
void storage_pid(PickleWriter& w, const char* key = "0", int64_t numel = 6, const char* cls = "FloatStorage") {
  w.mark().str("storage").global("torch", cls).str(key).str("cpu").integer(numel).tuple().binpersid();
}
std::function<void(PickleWriter&)> tensor_expr(std::vector<int64_t> size, std::vector<int64_t> stride,
                                               int64_t offset = 0, const char* key = "0", int64_t numel = 6) {
  return [=](PickleWriter& w) {
    w.global("torch._utils", "_rebuild_tensor_v2").mark();
    storage_pid(w, key, numel);
    w.integer(offset).int_tuple(size).int_tuple(stride).boolean(false).global("collections", "OrderedDict");
    w.tuple_n(0).reduce().tuple().reduce();
  };
}
std::function<void(const TempDir&)> bin_entries(std::vector<std::pair<std::string, std::string>> entries) {
  return [=](const TempDir& d) {
    testing::write_zip(d / "m.bin", entries);
    load_torch_bin(d / "m.bin");
  };
}

// --- indexes and offload folders ----------------------------------------------------------------------------------

std::function<void(const TempDir&)> index_json(std::string json) {
  return [=](const TempDir& d) {
    write_bytes(d / "model.safetensors.index.json", json);
    get_checkpoint_shard_files(d / "model.safetensors.index.json");
  };
}
std::function<void(const TempDir&)> offload_index(std::string json) {
  return [=](const TempDir& d) {
    write_bytes(d / "index.json", json);
    load_offload_index(d.path());
  };
}

const std::vector<Case>& cases() {
  static const std::vector<Case> table = {
      // safetensors: sizes and header length
      {"st_empty_file", st_raw(""), "too small to be safetensors"},
      {"st_five_bytes", st_raw("abcde"), "too small to be safetensors"},
      {"st_header_absurd", st_raw(le64(uint64_t{1} << 40) + "{}"), "exceeds the 100000000-byte limit"},
      {"st_header_past_eof", st_raw(le64(1000) + "{}"), "runs past the end of the file"},
      {"st_header_too_short", st_raw(le64(1) + "{"), "too short to be a JSON object"},
      // safetensors: JSON
      {"st_invalid_json", st(R"({"a":{"dtype":)"), "safetensors header is not valid JSON"},
      {"st_invalid_utf8", st("{\"\xff\xfe\":{}}"), "not valid UTF-8 (bad byte sequence at offset 2)"},
      {"st_overlong_utf8", st("{\"\xc0\xaf\":{}}"), "not valid UTF-8"},
      {"st_not_object", st("[1,2,3]"), "header must be a JSON object"},
      {"st_duplicate_name", st("{" + kA + "," + kA + "}"), "repeats the key \"a\""},
      {"st_duplicate_field", st(R"({"a":{"dtype":"F32","dtype":"F16","shape":[6],"data_offsets":[0,24]}})"),
       "repeats the key \"dtype\""},
      // safetensors: entries
      {"st_unknown_dtype", st(R"({"a":{"dtype":"F4","shape":[48],"data_offsets":[0,24]}})"),
       "unknown or unsupported dtype \"F4\""},
      {"st_dtype_not_string", st(R"({"a":{"dtype":3,"shape":[6],"data_offsets":[0,24]}})"),
       "\"dtype\" must be a string"},
      {"st_missing_offsets", st(R"({"a":{"dtype":"F32","shape":[6]}})"), "lacks \"data_offsets\""},
      {"st_unknown_field", st(R"({"a":{"dtype":"F32","shape":[6],"data_offsets":[0,24],"foo":1}})"),
       "unknown field \"foo\""},
      {"st_empty_name", st(R"({"":{"dtype":"F32","shape":[6],"data_offsets":[0,24]}})"), "tensor with an empty name"},
      {"st_negative_dim", st(R"({"a":{"dtype":"F32","shape":[-2,3],"data_offsets":[0,24]}})"),
       "a: negative dimension -2 in shape"},
      {"st_fractional_dim", st(R"({"a":{"dtype":"F32","shape":[2.5],"data_offsets":[0,24]}})"),
       "\"shape\" must be a list of integers"},
      {"st_shape_overflow",
       st(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,24]}})"),
       "overflows 64 bits"},
      {"st_size_mismatch", st(R"({"a":{"dtype":"F32","shape":[5],"data_offsets":[0,24]}})"),
       "shape [5] of F32 needs 20 bytes, but data_offsets span 24"},
      {"st_offsets_not_pair", st(R"({"a":{"dtype":"F32","shape":[6],"data_offsets":[0,24,48]}})"),
       "\"data_offsets\" must be [begin, end]"},
      {"st_negative_offset", st(R"({"a":{"dtype":"F32","shape":[6],"data_offsets":[-4,20]}})"),
       "two non-negative integers"},
      {"st_reversed_offsets", st(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[24,0]}})"),
       "[24, 0] are reversed"},
      {"st_metadata_not_strings", st(R"({"__metadata__":{"format":1},)" + kA + "}"),
       "__metadata__ value of \"format\" must be a string"},
      // safetensors: layout of the data section
      {"st_out_of_bounds", st(R"({"a":{"dtype":"F32","shape":[8],"data_offsets":[0,32]}})"),
       "a: data_offsets [0, 32] run past the end of the data section (24 bytes)"},
      {"st_overlap",
       st(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"b":{"dtype":"F32","shape":[4],"data_offsets":[8,24]}})"),
       "b: bytes [8, 24) overlap tensor \"a\""},
      {"st_hole",
       st(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[3],"data_offsets":[12,24]}})"),
       "b: hole of 4 unused bytes"},
      {"st_hole_at_start", st(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[8,24]}})"), "hole of 8 unused bytes"},
      {"st_trailing_bytes", st("{" + kA + "}", std::string(32, '\0')),
       "8 bytes after the last tensor are not described"},

      // torch .bin: the container
      {"bin_not_zip", [](const TempDir& d) { write_bytes(d / "m.bin", "hello world, not a zip"); load_torch_bin(d / "m.bin"); },
       "not a PyTorch checkpoint"},
      {"bin_legacy_format",
       [](const TempDir& d) { write_bytes(d / "m.bin", std::string("\x80\x02") + "legacy pickle follows"); load_torch_bin(d / "m.bin"); },
       "legacy (pre-1.6) torch.save format"},
      {"bin_truncated_zip",
       [](const TempDir& d) {
         testing::write_zip(d / "full.bin", {{"archive/data.pkl", "x"}, {"archive/data/0", std::string(100, 'a')}});
         write_bytes(d / "m.bin", iotest::read_bytes(d / "full.bin").substr(0, 150));
         load_torch_bin(d / "m.bin");
       },
       "no zip end-of-central-directory record"},
      {"bin_no_data_pkl", bin_entries({{"archive/other.txt", "x"}}), "has no <name>/data.pkl"},
      {"bin_torchscript", bin_entries({{"archive/constants.pkl", "x"}, {"archive/code/m.py", "x"}}),
       "TorchScript archive"},
      {"bin_big_endian", bin_entries({{"archive/data.pkl", "."}, {"archive/byteorder", "big"}}),
       "big-endian checkpoints are not supported"},
      // torch .bin: hostile pickles
      {"bin_global_os_system",
       bin_pickle(PickleWriter().proto(2).global("os", "system").str("echo pwned").tuple_n(1).reduce().stop().bytes()),
       "global 'os.system' is not allowed"},
      {"bin_global_builtins_eval",
       bin_pickle(PickleWriter().proto(2).global("builtins", "eval").str("1").tuple_n(1).reduce().stop().bytes()),
       "global 'builtins.eval' is not allowed"},
      {"bin_global_model_class",
       bin_pickle(state_dict_with([](PickleWriter& w) { w.global("mymodels", "Net").tuple_n(0).reduce(); })),
       "global 'mymodels.Net' is not allowed"},
      {"bin_opcode_inst", bin_pickle(PickleWriter().proto(2).mark().raw("ios\nsystem\n").stop().bytes()),
       "pickle opcode INST (0x69) is not allowed"},
      {"bin_opcode_newobj", bin_pickle(PickleWriter().proto(2).global("torch", "Tensor").tuple_n(0).raw("\x81").stop().bytes()),
       "pickle opcode NEWOBJ (0x81) is not allowed"},
      {"bin_calls_storage_type",
       bin_pickle(PickleWriter().proto(2).global("torch", "FloatStorage").tuple_n(0).reduce().stop().bytes()),
       "global 'torch.FloatStorage' cannot be called"},
      {"bin_truncated_pickle", bin_pickle(PickleWriter().proto(2).empty_dict().raw(std::string_view("X\x10\x00\x00\x00" "ab", 7)).bytes()),
       "pickle is truncated"},
      {"bin_no_stop", bin_pickle(PickleWriter().proto(2).empty_dict().bytes()), "pickle ends without STOP"},
      {"bin_stack_underflow", bin_pickle(PickleWriter().proto(2).reduce().stop().bytes()), "pickle stack underflow"},
      {"bin_pop_below_mark", bin_pickle(PickleWriter().proto(2).empty_dict().mark().setitem().stop().bytes()),
       "pickle stack underflow"},
      {"bin_memo_missing", bin_pickle(PickleWriter().proto(2).get(7).stop().bytes()), "pickle memo has no entry 7"},
      {"bin_ordered_dict_args",
       bin_pickle(PickleWriter().proto(2).global("collections", "OrderedDict").str("x").tuple_n(1).reduce().stop().bytes()),
       "OrderedDict is only accepted with no arguments"},
      {"bin_bad_persistent_id",
       bin_pickle(state_dict_with([](PickleWriter& w) { w.str("storage").binpersid(); })),
       "persistent id is not ('storage', type, key, location, numel)"},
      {"bin_storage_key_path",
       bin_pickle(state_dict_with([](PickleWriter& w) {
         w.global("torch._utils", "_rebuild_tensor_v2").mark();
         storage_pid(w, "../../etc/passwd");
         w.integer(0).int_tuple({6}).int_tuple({1}).boolean(false).empty_dict().tuple().reduce();
       })),
       "storage key must be a short alphanumeric string"},
      // torch .bin: structure of the state dict
      {"bin_top_level_list", bin_pickle(PickleWriter().proto(2).empty_list().stop().bytes()),
       "the checkpoint holds a list, not a state dict"},
      {"bin_nested_state_dict",
       bin_pickle(PickleWriter().proto(2).empty_dict().str("state_dict").empty_dict().setitem().stop().bytes()),
       "state_dict: value is a dict, not a tensor"},
      {"bin_duplicate_key",
       bin_pickle(PickleWriter().proto(2).empty_dict().mark().str("a").none().str("a").none().setitems().stop().bytes()),
       "state dict names \"a\" twice"},
      // torch .bin: storages and views
      {"bin_missing_storage", bin_pickle(state_dict_with(tensor_expr({6}, {1}, 0, "7")), "0"),
       "storage \"7\" named by data.pkl is missing from the archive"},
      {"bin_storage_size_mismatch", bin_pickle(state_dict_with(tensor_expr({6}, {1})), "0", 20),
       "storage \"0\" should hold 6 elements of f32 but its entry has 20 bytes"},
      {"bin_view_past_storage", bin_pickle(state_dict_with(tensor_expr({2, 3}, {3, 1}, 2))),
       "w: tensor [2, 3] at offset 2 reaches element 7 of a storage of 6"},
      {"bin_negative_stride", bin_pickle(state_dict_with(tensor_expr({2, 3}, {-3, 1}))), "w: negative stride"},
      {"bin_size_stride_rank", bin_pickle(state_dict_with(tensor_expr({2, 3}, {1}))), "2 sizes but 1 strides"},

      // checkpoint indexes
      {"index_parent_dir_shard", index_json(R"({"weight_map":{"a":"../x.safetensors"}})"),
       "shard name \"../x.safetensors\" is not a plain file name"},
      {"index_absolute_shard", index_json(R"({"weight_map":{"a":"/etc/passwd"}})"),
       "shard name \"/etc/passwd\" is not a plain file name"},
      {"index_no_weight_map", index_json(R"({"metadata":{}})"), "has no \"weight_map\""},
      {"index_bad_total_size", index_json(R"({"metadata":{"total_size":-5},"weight_map":{"a":"x.safetensors"}})"),
       "\"total_size\" must be a non-negative integer"},
      {"index_missing_shards",
       index_json(R"({"weight_map":{"a":"model-1.safetensors","b":"model-2.safetensors","c":"model-2.safetensors"}})"),
       "index names 2 shard file(s) that do not exist", ErrorKind::NotFound},
      {"index_symlink_out",
       [](const TempDir& d) {
         write_bytes(d / "outside.safetensors", "x");
         std::filesystem::create_directory(d / "ckpt");
         std::filesystem::create_symlink(d / "outside.safetensors", d / "ckpt" / "s.safetensors");
         write_bytes(d / "ckpt" / "model.safetensors.index.json", R"({"weight_map":{"a":"s.safetensors"}})");
         get_checkpoint_shard_files(d / "ckpt");
       },
       "is a symlink to"},
      {"folder_without_checkpoint",
       [](const TempDir& d) {
         write_bytes(d / "config.json", "{}");
         get_checkpoint_shard_files(d.path());
       },
       "no checkpoint found in folder", ErrorKind::NotFound},

      // offload folders
      {"offload_no_index", [](const TempDir& d) { load_offload_index(d.path()); }, "offload folder has no index.json",
       ErrorKind::NotFound},
      {"offload_name_escapes", offload_index(R"({"../evil":{"dtype":"float32","shape":[1]}})"),
       "weight name \"../evil\" cannot be stored"},
      {"offload_unknown_dtype", offload_index(R"({"w":{"dtype":"complex64","shape":[1]}})"),
       "unknown dtype \"complex64\""},
      {"offload_negative_shape", offload_index(R"({"w":{"dtype":"float32","shape":[-1]}})"),
       "\"shape\" must hold non-negative integers"},
      {"offload_dat_size_mismatch",
       [](const TempDir& d) {
         write_bytes(d / "w.dat", std::string(10, '\0'));
         load_offloaded_weight(d / "w.dat", OffloadEntry{.dtype = DType::F32, .shape = Shape{2, 2}});
       },
       "file holds 10 bytes, but the index says [2, 2] float32 (16 bytes)"},
  };
  return table;
}

class MalformedFile : public ::testing::TestWithParam<Case> {};

TEST_P(MalformedFile, IsRefusedWithAClearError) {
  TempDir dir;
  EXPECT_FERRY_ERROR_KIND(GetParam().run(dir), GetParam().kind, GetParam().expected);
}

INSTANTIATE_TEST_SUITE_P(Table, MalformedFile, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

TEST(MalformedFileTable, HasAtLeast25Cases) { EXPECT_GE(cases().size(), 25u); }

}  // namespace
}  // namespace ferry::io
