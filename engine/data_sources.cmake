# The data layer (namespace fathom::data): datasets, token files, the data loader.
# Paths are relative to engine/; engine/CMakeLists.txt adds them to the fathom library.
set(FATHOM_DATA_SOURCES
  byte_text_dataset.cpp
  data_collate.cpp
  data_loader.cpp
  data_sample_map.cpp
  data_shuffle.cpp
  data_token_file.cpp
  data_token_stream.cpp
  dataset.cpp
  tensor_dataset.cpp
  token_dataset.cpp)
