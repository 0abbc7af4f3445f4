/* exit_signal.c: see exit_signal.h. The handler only stores the signal number (async-signal
 * safe); everything else happens in the training loop. */
#include "app/training/exit_signal.h"
#include "app/core/error.h"

#include <signal.h>
#include <string.h>

static volatile sig_atomic_t received_signal;

static void on_signal(int signal_number) { received_signal = signal_number; }

void exit_signal_install(void) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = on_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    const int signals[] = {SIGTERM, SIGUSR1, SIGUSR2};
    for (size_t i = 0; i < sizeof signals / sizeof signals[0]; i++)
        CHECK(sigaction(signals[i], &action, NULL) == 0, "sigaction(%d) failed", signals[i]);
}

int exit_signal_received(void) { return (int)received_signal; }
