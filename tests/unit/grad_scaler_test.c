/* grad_scaler_test.c: Megatron's loss scaler (app/optim/grad_scaler.c) against sequences of
 * found_inf worked by hand from DynamicGradScaler.update: hysteresis 2 and 1, the floor at
 * --min-loss-scale, growth after --loss-scale-window finite steps (which refills the hysteresis),
 * a window that is not a whole number, the constant scaler and no scaler. */
#include "app/optim/grad_scaler.h"
#include "tests/tap.h"

#include <math.h>
#include <string.h>

/* apply the found_inf flags of `steps` ('1' overflow, '0' finite) in order */
static void run(grad_scaler *s, const char *steps) {
    for (const char *c = steps; *c; c++) grad_scaler_update(s, *c == '1');
}

int main(void) {
    grad_scaler s;
    grad_scaler_init_dynamic(&s, 4294967296.0f, 1.0f, 1000, 2);
    tap_ok(s.scale == 4294967296.0f && s.growth_tracker == 0 && s.hysteresis_tracker == 2,
           "dynamic: starts at --initial-loss-scale 2^32, trackers 0 and --hysteresis");
    tap_ok(grad_scaler_inv_scale(&s) == ldexpf(1.0f, -32), "inv_scale of 2^32 is exactly 2^-32");
    run(&s, "1");
    tap_ok(s.scale == 4294967296.0f && s.hysteresis_tracker == 1, "hysteresis 2: the first overflow keeps the scale");
    run(&s, "1");
    tap_ok(s.scale == 2147483648.0f && s.hysteresis_tracker == 0, "the second overflow halves it (2^31)");
    run(&s, "1");
    tap_ok(s.scale == 1073741824.0f && s.hysteresis_tracker == -1,
           "every further overflow halves again (2^30): the tracker is not refilled by an overflow");
    run(&s, "0001");
    tap_ok(s.scale == 536870912.0f && s.growth_tracker == 0,
           "finite steps short of the window do not refill the hysteresis: the next overflow halves (2^29)");

    grad_scaler_init_dynamic(&s, 8.0f, 1.0f, 3, 1);
    run(&s, "1");
    tap_ok(s.scale == 4.0f, "hysteresis 1: the first overflow halves (8 -> 4)");
    run(&s, "00");
    tap_ok(s.scale == 4.0f && s.growth_tracker == 2, "two finite steps of a window of 3: no growth yet");
    run(&s, "0");
    tap_ok(s.scale == 8.0f && s.growth_tracker == 0 && s.hysteresis_tracker == 1,
           "the third finite step doubles the scale and restarts the tracker");
    run(&s, "001000");
    tap_ok(s.scale == 8.0f && s.growth_tracker == 3 - 3,
           "an overflow restarts the window: 8 -> 4 at the overflow, x2 after 3 more finite steps");
    run(&s, "1111111");
    tap_ok(s.scale == 1.0f, "the scale stops at --min-loss-scale 1");
    run(&s, "1");
    tap_ok(s.scale == 1.0f, "and stays there");

    grad_scaler_init_dynamic(&s, 1024.0f, 100.0f, 1000, 1);
    run(&s, "1111");
    tap_ok(s.scale == 100.0f, "a floor that is not a power of two: 1024 512 256 128 then max(64, 100) = 100");

    grad_scaler_init_dynamic(&s, 2.0f, 1.0f, 2, 3);
    run(&s, "110");
    tap_ok(s.scale == 2.0f && s.hysteresis_tracker == 1, "hysteresis 3: two overflows keep the scale");
    run(&s, "00");
    tap_ok(s.scale == 4.0f && s.hysteresis_tracker == 3, "a growth refills the hysteresis to 3");
    run(&s, "11");
    tap_ok(s.scale == 4.0f, "so two more overflows keep the scale again");

    grad_scaler_init_dynamic(&s, 2.0f, 1.0f, 2.5, 2);
    run(&s, "000000");
    tap_ok(s.scale == 2.0f && s.growth_tracker == 6, "a window of 2.5 is never reached (Megatron compares with ==)");

    grad_scaler_init_dynamic(&s, ldexpf(1.0f, 127), 1.0f, 1, 2);
    run(&s, "0");
    tap_ok(isinf(s.scale), "growth past the fp32 range gives inf, as Megatron's fp32 tensor does");

    grad_scaler_init_constant(&s, 65536.0f);
    run(&s, "1111000000");
    tap_ok(grad_scaler_scale(&s) == 65536.0f, "constant (--loss-scale 65536): overflows and finite steps change nothing");
    tap_ok(grad_scaler_inv_scale(&s) == 1.0f / 65536.0f, "its inv_scale is exact");
    grad_scaler_init_constant(&s, 3.0f);
    tap_ok(grad_scaler_inv_scale(&s) == (float)(1.0 / 3.0), "inv_scale of 3 is 1/3 in double rounded to fp32");

    grad_scaler_init_none(&s);
    run(&s, "111");
    tap_ok(!s.enabled && grad_scaler_scale(&s) == 1.0f && grad_scaler_inv_scale(&s) == 1.0f,
           "no scaler: scale 1 whatever happens");
    return tap_done();
}
