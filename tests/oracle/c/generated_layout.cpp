// The generated headers compiled by g++ as C++17: its static asserts run here,
// and the X-macro hands every field's offsetof/sizeof, as the C++ compiler
// computes them, to the Rust test that compares them with Rust's layout.
#include <cstddef>
#include <cstdint>

#include "marrow/generated/gcrb.h"
#include "marrow/generated/mlx5.h"
#include "marrow/generated/pcie.h"

struct generated_field {
    const char *strct;
    const char *field;
    size_t offset;
    size_t size;
    size_t struct_size;
};

#define X(s, f) {#s, #f, offsetof(struct marrow_##s, f), sizeof(((struct marrow_##s *)nullptr)->f), sizeof(struct marrow_##s)},
static const generated_field table[] = {MARROW_MLX5_LAYOUT_FIELDS(X) MARROW_GCRB_LAYOUT_FIELDS(X) MARROW_PCIE_LAYOUT_FIELDS(X)};
#undef X

extern "C" size_t generated_field_count() { return sizeof(table) / sizeof(table[0]); }
extern "C" const generated_field *generated_field_at(size_t i) {
    return i < generated_field_count() ? &table[i] : nullptr;
}
