// latscope: a Verilator harness's output, the instrument's bytes on stdout, buffered. Shared by
// gateware/harness.cpp (gateware/verilator.py) and the multi-clock benches' harnesses
// (latscope/bench/twoclock.py), which put this text in front of their own.

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <unistd.h>

namespace harness_out {

unsigned char buf[1 << 16];
size_t len = 0;

// Write everything buffered; a write interrupted by a signal is retried. If the reader has gone
// away there is nothing more to do, so the harness exits quietly.
void flush() {
    size_t done = 0;
    while (done < len) {
        ssize_t n = write(1, buf + done, len - done);
        if (n < 0) {
            if (errno == EINTR) continue;
            _exit(0);
        }
        done += static_cast<size_t>(n);
    }
    len = 0;
}

void put(uint8_t byte) {
    if (len == sizeof(buf)) flush();
    buf[len++] = byte;
}

}  // namespace harness_out
