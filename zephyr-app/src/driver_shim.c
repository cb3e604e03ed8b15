/*
 * latscope MAC-driver shim: markers at the driver's receive handling and at the transmit
 * hand-off to the MAC, without changing Zephyr's sources.
 *
 * TX (tx.xmit): the Ethernet L2 sends through net_if_get_device(iface)->api->send. We give the
 *   interface a RAM copy of its device whose API table is a RAM copy of the driver's, with send
 *   replaced by shim_send(), which raises tx.xmit and calls the driver's own send with the
 *   original device. Everything else (config, data, state) is shared with the original device.
 * RX (rx.isr, rx.copy): a NET_PKT_FILTER receive rule runs inside net_recv_data(), in driver
 *   context, once the driver has the frame in a net_pkt: rx.copy is raised there. rx.isr is
 *   raised by an ISR wrapper with CONFIG_LATSCOPE_SHIM_ISR; otherwise at the same hook, just
 *   before rx.copy (the earliest point every driver shares; on native_sim there is no ISR).
 *   The rule also hands fast-track frames to fast_track_take(). Other frames pass untouched.
 * Markers fire only for datagrams of the selected path and size (app_marks_datagram()), so the
 * edges of one packet are never interleaved with unrelated traffic.
 * SPDX-License-Identifier: BSD-2-Clause
 */
#include <string.h>
#include <zephyr/kernel.h>
#include <zephyr/net/ethernet.h>
#include <zephyr/net/net_if.h>
#include <zephyr/net/net_pkt.h>
#include <zephyr/net/net_pkt_filter.h>
#if defined(CONFIG_LATSCOPE_SHIM_ISR)
#include <zephyr/irq.h>
#include <zephyr/sw_isr_table.h>
#endif

#include "app.h"

bool driver_shim_isr_wrapped;

static struct device shim_dev;
static struct ethernet_api shim_api;
static const struct device *orig_dev;
static const struct ethernet_api *orig_api;

/* The path whose port a datagram is addressed to, or LS_PATH_COUNT. */
static uint8_t path_of_port(uint16_t port)
{
	for (uint8_t p = 0; p < LS_PATH_COUNT; p++) {
		if (app_path_built(p) && app_path_port(p) == port) {
			return p;
		}
	}
	return LS_PATH_COUNT;
}

static int shim_send(const struct device *dev, struct net_pkt *pkt)
{
	ARG_UNUSED(dev);
	uint8_t hdr[LS_CLASSIFY_MAX_HDR];
	size_t len = net_pkt_get_len(pkt);
	size_t n = MIN(len, sizeof(hdr));
	struct ls_udp_frame f;
	struct net_pkt_cursor backup;

	/* tx.xmit only for echoes of the selected path: their source port is the path's port. */
	net_pkt_cursor_backup(pkt, &backup);
	net_pkt_cursor_init(pkt);
	if (net_pkt_read(pkt, hdr, n) == 0 &&
	    ls_classify_udp(hdr, n, len, 0, &f) == LS_CLASS_MATCH) {
		uint8_t path = path_of_port(f.src_port);

		if (path < LS_PATH_COUNT && app_path_selected(path) &&
		    ls_ctrl_size_selected(&app_ctrl.config, f.payload_len)) {
			app_mark(LS_POINT_TX_XMIT);
		}
	}
	net_pkt_cursor_restore(pkt, &backup);
	return orig_api->send(orig_dev, pkt);
}

struct rx_test {
	struct npf_test test;
};

static bool rx_hook(struct npf_test *test, struct net_pkt *pkt)
{
	ARG_UNUSED(test);
	uint8_t hdr[LS_CLASSIFY_MAX_HDR];
	size_t len = net_pkt_get_len(pkt);
	size_t n = MIN(len, sizeof(hdr));
	struct ls_udp_frame f;
	struct net_pkt_cursor backup;
	bool taken = false;

	ls_counter_inc(&app_counters, LS_CNT_RX_FRAMES);
	net_pkt_cursor_backup(pkt, &backup);
	net_pkt_cursor_init(pkt);
	if (net_pkt_read(pkt, hdr, n) != 0 ||
	    ls_classify_udp(hdr, n, len, 0, &f) != LS_CLASS_MATCH) {
		net_pkt_cursor_restore(pkt, &backup);
		return false;
	}
	uint8_t path = path_of_port(f.dst_port);

	if (path < LS_PATH_COUNT && app_path_selected(path) &&
	    ls_ctrl_size_selected(&app_ctrl.config, f.payload_len)) {
		if (!driver_shim_isr_wrapped) {
			app_mark(LS_POINT_RX_ISR);
		}
		app_mark(LS_POINT_RX_COPY);
	}
#if defined(CONFIG_LATSCOPE_PATH_FAST)
	if (path == LS_PATH_FAST && app_path_selected(LS_PATH_FAST)) {
		taken = fast_track_take(pkt, hdr, n, &f);
	}
#endif
	net_pkt_cursor_restore(pkt, &backup);
	return taken; /* true: the rule's verdict (NET_DROP) applies; the stack never sees it */
}

static struct rx_test rx_test = {.test.fn = rx_hook};
static NPF_RULE(rx_rule, NET_DROP, rx_test);

#if defined(CONFIG_LATSCOPE_SHIM_ISR)
#define ETH_NODE DT_CHOSEN(latscope_eth_mac)
static void (*orig_isr)(const void *arg);
static const void *orig_isr_arg;

static void isr_wrapper(const void *arg)
{
	ARG_UNUSED(arg);
	app_mark(LS_POINT_RX_ISR);
	orig_isr(orig_isr_arg);
}

static void wrap_isr(void)
{
	unsigned int irq = DT_IRQN(ETH_NODE);
	const struct _isr_table_entry *e = &_sw_isr_table[irq - CONFIG_GEN_IRQ_START_VECTOR];

	orig_isr = e->isr;
	orig_isr_arg = e->arg;
	irq_connect_dynamic(irq, DT_IRQ(ETH_NODE, priority), isr_wrapper, NULL, 0);
	driver_shim_isr_wrapped = true;
}
#endif

int driver_shim_install(void)
{
	struct net_if *iface = net_if_get_first_by_type(&NET_L2_GET_NAME(ETHERNET));

	if (iface == NULL) {
		return -ENODEV;
	}
	/* TX: substitute the interface's device by a copy with a wrapped API. */
	orig_dev = net_if_get_device(iface);
	orig_api = orig_dev->api;
	memcpy(&shim_api, orig_api, sizeof(shim_api));
	shim_api.send = shim_send;
	memcpy(&shim_dev, orig_dev, sizeof(shim_dev));
	shim_dev.api = &shim_api;
	iface->if_dev->dev = &shim_dev;
	/* RX: our rule first, then accept everything else. */
	npf_append_recv_rule(&rx_rule);
	npf_append_recv_rule(&npf_default_ok);
#if defined(CONFIG_LATSCOPE_SHIM_ISR)
	wrap_isr();
#endif
	return 0;
}
