/*
 * latscope control server: the portable core's protocol (lib/latscope_core/control.h) on UDP
 * port CONFIG_LATSCOPE_CONTROL_PORT. The host selects path, sizes and marker points, runs the
 * calibration, reads counters and the build information. Specification: docs/zephyr-app.md.
 * SPDX-License-Identifier: BSD-2-Clause
 */
#include <zephyr/kernel.h>
#include <zephyr/logging/log.h>
#include <zephyr/net/socket.h>

#include "app.h"

LOG_MODULE_DECLARE(latscope);

static bool path_supported(void *user, uint8_t path)
{
	ARG_UNUSED(user);
	return app_path_built(path);
}

static size_t build_info(void *user, char *buf, size_t cap)
{
	ARG_UNUSED(user);
	return app_build_info(buf, cap);
}

static void config_changed(void *user, const struct ls_ctrl_config *cfg)
{
	ARG_UNUSED(user);
#if defined(CONFIG_LATSCOPE_MARKERS)
	latscope_markers_set_map(&cfg->markers);
#else
	ARG_UNUSED(cfg);
#endif
	LOG_INF("config: path %s, %u sizes", ls_path_names[cfg->path], cfg->n_sizes);
}

static void counters_reset(void *user)
{
	ARG_UNUSED(user);
#if defined(CONFIG_LATSCOPE_MARKERS)
	latscope_markers_pulses_reset();
#endif
}

static bool point_supported(void *user, uint8_t point)
{
	ARG_UNUSED(user);
	return app_point_measured(point);
}

static const struct ls_ctrl_ops ops = {
	.point_supported = point_supported,
	.counters_reset = counters_reset,
	.path_supported = path_supported,
#if defined(CONFIG_LATSCOPE_CALIBRATION)
	.calibrate = calibration_run,
#endif
	.build_info = build_info,
	.config_changed = config_changed,
};

static uint8_t in[LS_CTRL_REQ_HDR_LEN + LS_CTRL_MAX_BODY];
static uint8_t out[LS_CTRL_RESP_HDR_LEN + LS_CTRL_MAX_BODY];

static void control_server(void *a, void *b, void *c)
{
	struct sockaddr_in addr = {
		.sin_family = AF_INET,
		.sin_port = htons(CONFIG_LATSCOPE_CONTROL_PORT),
	};
	int sock = zsock_socket(AF_INET, SOCK_DGRAM, IPPROTO_UDP);

	ARG_UNUSED(a);
	ARG_UNUSED(b);
	ARG_UNUSED(c);
	app_ctrl.ops = &ops;
	if (sock < 0 || zsock_bind(sock, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
		LOG_ERR("control: cannot bind port %d (%d)", CONFIG_LATSCOPE_CONTROL_PORT, errno);
		return;
	}
	while (true) {
		struct sockaddr src;
		socklen_t src_len = sizeof(src);
		ssize_t n = zsock_recvfrom(sock, in, sizeof(in), 0, &src, &src_len);

		if (n <= 0) {
			continue;
		}
#if defined(CONFIG_LATSCOPE_TIME_STATS_REPORT)
		/* A batch of the time statistics ends where the host changes the setup. */
		time_stats_flush();
#endif
#if defined(CONFIG_LATSCOPE_MARKERS)
		app_counters.value[LS_CNT_MARKER_PULSES] = latscope_markers_pulses();
#endif
		size_t m = ls_ctrl_handle(&app_ctrl, in, (size_t)n, out, sizeof(out));

		if (m > 0) {
			(void)zsock_sendto(sock, out, m, 0, &src, src_len);
		}
	}
}

K_THREAD_DEFINE(latscope_control, 3072, control_server, NULL, NULL, NULL,
		CONFIG_LATSCOPE_ECHO_PRIORITY, 0, 100);
