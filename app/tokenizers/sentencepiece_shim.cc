// sentencepiece_shim.cc: the extern "C" side of sentencepiece_shim.h over libsentencepiece's
// SentencePieceProcessor. Every entry point catches what C++ could throw (allocation) and
// reports it the C way.
#include "app/tokenizers/sentencepiece_shim.h"

#include <sentencepiece_processor.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

struct spm_model {
    sentencepiece::SentencePieceProcessor processor;
};

extern "C" spm_model *spm_model_load(const char *path, char *err, size_t errlen) {
    try {
        spm_model *model = new spm_model;
        const auto status = model->processor.Load(path);
        if (!status.ok()) {
            std::snprintf(err, errlen, "SentencePiece model %s: %s", path, status.ToString().c_str());
            delete model;
            return nullptr;
        }
        return model;
    } catch (const std::exception &e) {
        std::snprintf(err, errlen, "SentencePiece model %s: %s", path, e.what());
        return nullptr;
    }
}

extern "C" void spm_model_free(spm_model *model) { delete model; }

extern "C" int spm_model_encode(spm_model *model, const char *text, size_t len, int32_t **ids,
                                size_t *n_ids, size_t *cap, char *err, size_t errlen) {
    try {
        std::vector<int> pieces;
        const auto status = model->processor.Encode(std::string(text, len), &pieces);
        if (!status.ok()) {
            std::snprintf(err, errlen, "SentencePiece: %s", status.ToString().c_str());
            return -1;
        }
        if (*n_ids + pieces.size() > *cap) {
            size_t new_cap = *cap ? *cap : 256;
            while (new_cap < *n_ids + pieces.size()) new_cap *= 2;
            int32_t *grown = static_cast<int32_t *>(std::realloc(*ids, new_cap * sizeof **ids));
            if (!grown) {
                std::snprintf(err, errlen, "SentencePiece: out of memory");
                return -1;
            }
            *ids = grown;
            *cap = new_cap;
        }
        for (int id : pieces) (*ids)[(*n_ids)++] = id;
        return 0;
    } catch (const std::exception &e) {
        std::snprintf(err, errlen, "SentencePiece: %s", e.what());
        return -1;
    }
}

extern "C" char *spm_model_decode(spm_model *model, const int32_t *ids, size_t n, size_t *out_len) {
    try {
        const int size = model->processor.GetPieceSize();
        std::vector<int> pieces(ids, ids + n);
        for (int id : pieces)
            if (id < 0 || id >= size) return nullptr;
        std::string text;
        if (!model->processor.Decode(pieces, &text).ok()) return nullptr;
        char *out = static_cast<char *>(std::malloc(text.size() + 1));
        if (!out) return nullptr;
        std::memcpy(out, text.data(), text.size());
        out[text.size()] = '\0';
        if (out_len) *out_len = text.size();
        return out;
    } catch (const std::exception &) {
        return nullptr;
    }
}

extern "C" int spm_model_piece_size(const spm_model *model) { return model->processor.GetPieceSize(); }
extern "C" int spm_model_bos(const spm_model *model) { return model->processor.bos_id(); }
extern "C" int spm_model_eos(const spm_model *model) { return model->processor.eos_id(); }
