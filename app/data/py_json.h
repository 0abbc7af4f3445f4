/* py_json.h: text exactly as Python's json.dumps(obj, indent=4) writes it (ensure_ascii, ", "
 * becomes "," at line ends, ": " after keys, repr() for floats), built value by value in order;
 * Megatron-Core names its index cache files after the MD5 of such a text (the dataset's
 * unique_description), so ours must be the same to the byte. */
#ifndef PY_JSON_H
#define PY_JSON_H

#include <stddef.h>
#include <stdint.h>

enum { PY_JSON_MAX_DEPTH = 16 };

typedef struct py_json {
    char *text;
    size_t length, capacity;
    int depth;
    int count[PY_JSON_MAX_DEPTH];    /* values written so far at each open level */
    char kind[PY_JSON_MAX_DEPTH];    /* '{' or '[' */
    const char *key;                 /* the key of the next value inside an object */
} py_json;

void py_json_init(py_json *j);
void py_json_free(py_json *j);

/* set the key of the next value (inside an object) */
void py_json_key(py_json *j, const char *key);
void py_json_begin_object(py_json *j);
void py_json_end_object(py_json *j);
void py_json_begin_array(py_json *j);
void py_json_end_array(py_json *j);
void py_json_string(py_json *j, const char *value);  /* NULL: null */
void py_json_int(py_json *j, int64_t value);
void py_json_float(py_json *j, double value);        /* Python's repr(float) */
void py_json_null(py_json *j);
void py_json_bool(py_json *j, int value);             /* true / false */

/* Python's repr() of a float: the shortest digits that read back to it, in fixed notation for
 * exponents -4 .. 15 ("0.969", "1.0", "0.0001"), else "1e-05" / "1.5e+16" */
void py_float_repr(double value, char *out, size_t cap);

/* lowercase hexadecimal MD5 of text (hashlib.md5(text.encode()).hexdigest()) */
void md5_hex(const char *text, size_t length, char out[33]);

#endif
