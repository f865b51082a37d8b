#pragma once
// Data for training across ranks, by topic:
//   mpiaccel/sampler.hpp     the seeded, rank-disjoint, resumable DistributedSampler;
//   mpiaccel/loader.hpp      Dataset, Batch and the DistributedLoader;
//   mpiaccel/datasets.hpp    text, Fashion-MNIST, HDF5 arrays, make_dataset by name;
//   mpiaccel/token_data.hpp  token files and their TokenDataset;
//   mpiaccel/tokenizer.hpp   the BPE Tokenizer.
// This header includes them all.

#include "mpiaccel/datasets.hpp"
#include "mpiaccel/loader.hpp"
#include "mpiaccel/sampler.hpp"
#include "mpiaccel/token_data.hpp"
#include "mpiaccel/tokenizer.hpp"
