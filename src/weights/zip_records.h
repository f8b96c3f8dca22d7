// A check of a zip archive's central directory before LibTorch's zip reader sees it: the reader
// allocates each record's declared uncompressed size up front, so a few hostile bytes could claim
// gigabytes. Every entry's sizes must fit the file (stored records) or a deflate ratio of at most
// 1100:1 (compressed ones). Zip64 is understood. RuntimeError("<source>: why") otherwise.
#pragma once

#include <string>

#include <caffe2/serialize/read_adapter_interface.h>

namespace sparsevit::weights {

void check_zip_record_sizes(const caffe2::serialize::ReadAdapterInterface& in, const std::string& source);

}  // namespace sparsevit::weights
