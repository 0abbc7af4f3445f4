/* hf_real_text.c: see hf_real_text.h. */
#include "app/model/hf_real_text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void hf_real_text(double value, int as_float, char *text, size_t size) {
    for (int digits = 1; digits <= 17; digits++) {
        snprintf(text, size, "%.*g", digits, value);
        double back = strtod(text, NULL);
        if (as_float ? (float)back == (float)value : back == value) break;
    }
    if (!strpbrk(text, ".eEn")) strncat(text, ".0", size - strlen(text) - 1);
}
