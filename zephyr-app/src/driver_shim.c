/*
 * latscope MAC-driver shim: markers at the receive interrupt, at the driver's hand-over of each
 * frame, and at the transmit queue, using only mechanisms Zephyr supports; no change to Zephyr's
 * sources and no change to the interface's device.
 *
 * RX
 *  rx.isr     LATSCOPE_SHIM_ISR: the MAC's *receive* interrupt line is re-registered (dynamic
 *             interrupts, irq_connect_dynamic()) behind a wrapper that raises rx.isr and then
 *             calls the driver's own ISR with its own argument. The line is chosen by name
 *             from the devicetree ("rx", e.g. Kinetis ENET "TX","RX","ERR": never index 0).
 *             Where RX and TX share one line (Xilinx GEM, STM32H7 ETH) the wrapper reads the
 *             MAC's status first, with registers a read does not clear, and marks only when a
 *             receive cause is pending (GEM rx_status.FRAME_RX with RX unmasked, STM32H7
 *             DMACSR.RI).
 *             Without an ISR (native_sim's TAP) rx.isr is not measured (GET_INFO says so).
 *  rx.copy    a NET_PKT_FILTER receive rule runs inside net_recv_data(), i.e. when the driver
 *             has copied the frame out of its DMA ring into a net_pkt. A pre-selection of a few
 *             byte compares on the first buffer (ls_peek_udp) decides whether this datagram is
 *             marked; rx.copy is raised before any classification work.
 *  rx.handoff after the full classification (and, for the fast port, the fast track's
 *             acceptance test with the UDP checksum): the frame is handed to the stack's RX
 *             queue, or queued to the fast-track thread. The shim's own cost therefore lies in
 *             rx.copy -> rx.handoff and nowhere else.
 * TX
 *  tx.queue   a NET_PKT_FILTER send rule runs in net_if_queue_tx(): the frame enters the
 *             interface's TX queue (with NET_TC_TX_COUNT=0 the driver's send follows directly).
 *             The rule also remembers the marked packet for the two points below.
 *  tx.handoff LATSCOPE_SHIM_TX_HANDOFF: net_l2_send() (include/zephyr/net/net_l2.h; the
 *             Ethernet L2's only way to the driver) calls net_capture_pkt() and then the driver's
 *             api->send. The link wraps that global call (-Wl,--wrap=net_capture_pkt, needs
 *             CONFIG_NET_CAPTURE): the wrapper calls the real function first, then raises
 *             tx.handoff for the remembered packet, so the mark sits immediately before the
 *             driver's send. (Not net_capture_pkt_with_status(): net_capture_pkt() calls it
 *             inside capture.c, and --wrap only redirects references from other objects.)
 *  tx.xmit    the driver starts the MAC, per driver (GET_INFO point.tx.xmit says which):
 *             - native_sim TAP and Xilinx GEM copy the frame with net_pkt_read() and then start
 *               inline (nsi_host_write() to the TAP; NWCTRL.STARTTX after the descriptor
 *               updates): net_pkt_read() is wrapped and tx.xmit rises when the call that read
 *               the handed-over frame's last byte returns, in the thread that handed it over.
 *             - NXP ENET (eth_nxp_enet.c, eth_mcux.c): entry of ENET_SendFrame() (wrapped).
 *             - STM32 HAL: entry of HAL_ETH_Transmit_IT() (API v2) / HAL_ETH_TransmitFrame().
 *             Other drivers: not measured (GET_INFO point.tx.xmit=not-measured).
 *             A marked packet dropped before the driver (no ARP answer, queue full) leaves its
 *             pointer remembered until the next marked send replaces it.
 *             Under CONFIG_LTO a --wrap holds only if the call stays a call to an undefined
 *             symbol: CMakeLists.txt builds the source defining each wrapped function outside
 *             LTO (Zephyr's prohibit_lto compiler property), or the compiler binds the drivers'
 *             calls to the real function and these points never fire.
 * Markers fire only for datagrams of the selected path and size, so unrelated traffic never
 * interleaves edges; rx.isr is the exception (no frame is known yet at interrupt entry).
 * SPDX-License-Identifier: BSD-2-Clause
 */
#include <string.h>
#include <zephyr/kernel.h>
#include <zephyr/net/ethernet.h>
#include <zephyr/net/net_if.h>
#include <zephyr/net/net_pkt.h>
#include <zephyr/net/net_pkt_filter.h>
#include <zephyr/sys/sys_io.h>
#if defined(CONFIG_LATSCOPE_SHIM_ISR)
#include <zephyr/irq.h>
#include <zephyr/sw_isr_table.h>
#endif
#if defined(CONFIG_LATSCOPE_SHIM_TX_XMIT_ENET)
#include <fsl_enet.h>
#endif
#if defined(CONFIG_LATSCOPE_SHIM_TX_XMIT_STM32)
#include <soc.h>
#endif

#include "app.h"

bool driver_shim_isr_wrapped;

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

static bool marks(uint8_t path, uint16_t payload_len)
{
	return path < LS_PATH_COUNT && app_path_selected(path) &&
	       ls_ctrl_size_selected(&app_ctrl.config, payload_len);
}

#define RX_PAYLOAD_AT (LS_ETH_HDR_LEN + LS_IPV4_MIN_HDR + LS_UDP_HDR_LEN)

struct shim_test {
	struct npf_test test;
};

static bool rx_hook(struct npf_test *test, struct net_pkt *pkt)
{
	ARG_UNUSED(test);
	const struct net_buf *first = pkt->buffer;
	uint16_t port, payload_len;
	uint8_t path = LS_PATH_COUNT;
	bool mark = false;

	ls_counter_inc(&app_counters, LS_CNT_RX_FRAMES);
	uint64_t seq = APP_NO_SEQ;

	if (first != NULL && ls_peek_udp(first->data, first->len, &port, &payload_len)) {
		path = path_of_port(port);
		mark = marks(path, payload_len);
		/* ls_peek_udp() accepted an untagged IPv4 header without options: payload at 42 */
		if (mark && first->len > RX_PAYLOAD_AT) {
			seq = app_payload_seq(first->data + RX_PAYLOAD_AT, first->len - RX_PAYLOAD_AT);
		}
	}
	if (mark) {
		app_mark_seq(LS_POINT_RX_COPY, seq);
	}
#if defined(CONFIG_LATSCOPE_PATH_FAST)
	struct fast_item it = {.mark = mark};

	if (path == LS_PATH_FAST && app_path_selected(LS_PATH_FAST) &&
	    fast_track_accept(pkt, &it)) {
		/* Before the queue put: the fast-track thread may preempt us right there. */
		if (mark) {
			app_mark_seq(LS_POINT_RX_HANDOFF, seq);
		}
		return fast_track_enqueue(&it);
	}
#endif
	if (mark) {
		app_mark_seq(LS_POINT_RX_HANDOFF, seq);
	}
	return false; /* the stack's; true above: the rule's NET_DROP applies, the stack never sees it */
}

/* The packet the send rule marked (tx.queue), until the L2 hands it to the driver; then the
 * packet and thread of that hand-over (tx.handoff), until the driver starts the MAC (tx.xmit). */
static struct net_pkt *volatile tx_marked;
static struct net_pkt *volatile tx_handed;
static volatile uint64_t tx_marked_seq = APP_NO_SEQ;
static volatile uint64_t tx_handed_seq = APP_NO_SEQ;
static k_tid_t tx_handed_thread;

/* Send rule: at net_if_queue_tx() the packet starts at its IPv4 header (stack echoes) or at
 * its Ethernet header (fast-track replies, AF_PACKET). */
static bool tx_hook(struct npf_test *test, struct net_pkt *pkt)
{
	ARG_UNUSED(test);
	uint8_t hdr[LS_CLASSIFY_MAX_HDR];
	size_t len = net_pkt_get_len(pkt);
	size_t at = 0;
	struct ls_udp_frame f;
	struct net_pkt_cursor backup;

	if (net_pkt_family(pkt) == AF_INET) { /* give the classifier an Ethernet header */
		memset(hdr, 0, LS_ETH_HDR_LEN);
		hdr[12] = 0x08;
		at = LS_ETH_HDR_LEN;
	} else if (net_pkt_family(pkt) != AF_PACKET) {
		return false;
	}
	size_t n = MIN(len, sizeof(hdr) - at);

	net_pkt_cursor_backup(pkt, &backup);
	net_pkt_cursor_init(pkt);
	if (net_pkt_read(pkt, &hdr[at], n) == 0 &&
	    ls_classify_udp(hdr, at + n, at + len, 0, &f) == LS_CLASS_MATCH &&
	    marks(path_of_port(f.src_port), f.payload_len)) {
		uint64_t seq = at + n > f.payload_offset
				       ? app_payload_seq(&hdr[f.payload_offset],
							 at + n - f.payload_offset)
				       : APP_NO_SEQ;

		/* Only where a TX queue exists: without TX threads the send rule runs inline, right
		 * before the L2's send, and "queue" would name a wait that is not there. */
		if (CONFIG_NET_TC_TX_COUNT > 0) {
			app_mark_seq(LS_POINT_TX_QUEUE, seq);
		}
		tx_marked_seq = seq;
		tx_marked = pkt;
	}
	net_pkt_cursor_restore(pkt, &backup);
	return false; /* never drop: the rule only observes */
}

#if defined(CONFIG_LATSCOPE_SHIM_TX_HANDOFF)
void __real_net_capture_pkt(struct net_if *iface, struct net_pkt *pkt);

void __wrap_net_capture_pkt(struct net_if *iface, struct net_pkt *pkt)
{
	__real_net_capture_pkt(iface, pkt); /* also called for received packets: never ours */
	if (pkt != NULL && pkt == tx_marked) {
		tx_marked = NULL;
		tx_handed_thread = k_current_get();
		tx_handed_seq = tx_marked_seq;
		tx_handed = pkt;
		app_mark_seq(LS_POINT_TX_HANDOFF, tx_handed_seq);
	}
}
#endif

#if defined(CONFIG_LATSCOPE_SHIM_TX_XMIT_PKT_READ) || defined(CONFIG_LATSCOPE_SHIM_TX_XMIT_ENET) ||  \
	defined(CONFIG_LATSCOPE_SHIM_TX_XMIT_STM32)
/* Called where the driver starts the MAC: raise tx.xmit once for the handed-over frame. */
static inline void mark_xmit(void)
{
	if (tx_handed != NULL && tx_handed_thread == k_current_get()) {
		tx_handed = NULL;
		app_mark_seq(LS_POINT_TX_XMIT, tx_handed_seq);
	}
}
#endif

#if defined(CONFIG_LATSCOPE_SHIM_TX_XMIT_PKT_READ)
int __real_net_pkt_read(struct net_pkt *pkt, void *data, size_t length);

int __wrap_net_pkt_read(struct net_pkt *pkt, void *data, size_t length)
{
	int ret = __real_net_pkt_read(pkt, data, length);

	/* Only the handed-over packet: one compare for every other caller. */
	if (pkt == tx_handed && ret == 0 && net_pkt_remaining_data(pkt) == 0) {
		mark_xmit();
	}
	return ret;
}
#endif

#if defined(CONFIG_LATSCOPE_SHIM_TX_XMIT_ENET)
status_t __real_ENET_SendFrame(ENET_Type *base, enet_handle_t *handle, const uint8_t *data,
			       uint32_t length, uint8_t ringId, bool tsFlag, void *context);

status_t __wrap_ENET_SendFrame(ENET_Type *base, enet_handle_t *handle, const uint8_t *data,
			       uint32_t length, uint8_t ringId, bool tsFlag, void *context)
{
	mark_xmit();
	return __real_ENET_SendFrame(base, handle, data, length, ringId, tsFlag, context);
}
#endif

#if defined(CONFIG_LATSCOPE_SHIM_TX_XMIT_STM32) && defined(CONFIG_ETH_STM32_HAL_API_V2)
HAL_StatusTypeDef __real_HAL_ETH_Transmit_IT(ETH_HandleTypeDef *heth,
					     ETH_TxPacketConfig *pTxConfig);

HAL_StatusTypeDef __wrap_HAL_ETH_Transmit_IT(ETH_HandleTypeDef *heth,
					     ETH_TxPacketConfig *pTxConfig)
{
	mark_xmit();
	return __real_HAL_ETH_Transmit_IT(heth, pTxConfig);
}
#elif defined(CONFIG_LATSCOPE_SHIM_TX_XMIT_STM32)
HAL_StatusTypeDef __real_HAL_ETH_TransmitFrame(ETH_HandleTypeDef *heth, uint32_t FrameLength);

HAL_StatusTypeDef __wrap_HAL_ETH_TransmitFrame(ETH_HandleTypeDef *heth, uint32_t FrameLength)
{
	mark_xmit();
	return __real_HAL_ETH_TransmitFrame(heth, FrameLength);
}
#endif

const char *driver_shim_tx_where(enum ls_point point)
{
	if (point == LS_POINT_TX_HANDOFF) {
		return IS_ENABLED(CONFIG_LATSCOPE_SHIM_TX_HANDOFF)
			       ? "net_l2_send:net_capture_pkt-wrap" : "not-measured";
	}
	if (point != LS_POINT_TX_XMIT) {
		return "not-measured";
	}
#if defined(CONFIG_LATSCOPE_SHIM_TX_XMIT_PKT_READ) && defined(CONFIG_ETH_NATIVE_POSIX)
	return "net_pkt_read:tx-copy-done,tap-write-follows";
#elif defined(CONFIG_LATSCOPE_SHIM_TX_XMIT_PKT_READ)
	return "net_pkt_read:tx-copy-done,gem-starttx-follows";
#elif defined(CONFIG_LATSCOPE_SHIM_TX_XMIT_ENET)
	return "ENET_SendFrame:entry";
#elif defined(CONFIG_LATSCOPE_SHIM_TX_XMIT_STM32) && defined(CONFIG_ETH_STM32_HAL_API_V2)
	return "HAL_ETH_Transmit_IT:entry";
#elif defined(CONFIG_LATSCOPE_SHIM_TX_XMIT_STM32)
	return "HAL_ETH_TransmitFrame:entry";
#else
	return "not-measured";
#endif
}

static struct shim_test rx_test = {.test.fn = rx_hook};
static NPF_RULE(rx_rule, NET_DROP, rx_test);
static struct shim_test tx_test = {.test.fn = tx_hook};
static NPF_RULE(tx_rule, NET_DROP, tx_test);

#if defined(CONFIG_LATSCOPE_SHIM_ISR)
#define ETH_NODE DT_CHOSEN(latscope_eth_mac)

/* The receive interrupt line and how to tell a receive cause on a shared line. */
#if DT_IRQ_HAS_NAME(ETH_NODE, rx)
#define RX_IRQ      DT_IRQ_BY_NAME(ETH_NODE, rx, irq)
#define RX_IRQ_PRIO DT_IRQ_BY_NAME(ETH_NODE, rx, priority)
#define RX_CAUSE()  true /* a line of its own */
#define RX_ISR_WHERE "isr:rx-line"
#elif DT_NODE_HAS_COMPAT(ETH_NODE, xlnx_gem)
#define RX_IRQ      DT_IRQN(ETH_NODE)
#define RX_IRQ_PRIO DT_IRQ(ETH_NODE, priority)
/* Not intr_status (+0x24): QEMU's GEM clears it on read (silicon clears by writing 1), so
 * reading it would steal the driver's causes. Instead: rx_status (+0x20) bit 1 "frame
 * received" (write-1-to-clear; the driver clears it when it has processed the ring) while the
 * RX interrupt is unmasked in intr_mask (+0x30, bit 1 = 1: masked; the driver masks it from
 * its ISR until the ring is processed), so a TX-complete interrupt that arrives while
 * received frames wait for processing does not mark again. */
#define RX_CAUSE()                                                                         \
	(((sys_read32(DT_REG_ADDR(ETH_NODE) + 0x20u) & BIT(1)) != 0u) &&                    \
	 ((sys_read32(DT_REG_ADDR(ETH_NODE) + 0x30u) & BIT(1)) == 0u))
#define RX_ISR_WHERE "isr:shared-line,gem-rx-status"
#elif DT_NODE_HAS_COMPAT(ETH_NODE, st_stm32_ethernet) && defined(CONFIG_SOC_SERIES_STM32H7X)
#define RX_IRQ      DT_IRQN(ETH_NODE)
#define RX_IRQ_PRIO DT_IRQ(ETH_NODE, priority)
/* ETH_DMACSR (+0x1160), bit 6 RI "receive interrupt"; cleared by writing 1. */
#define RX_CAUSE()  ((sys_read32(DT_REG_ADDR(ETH_NODE) + 0x1160u) & BIT(6)) != 0u)
#define RX_ISR_WHERE "isr:shared-line,stm32h7-dmacsr-ri"
#else
#error "LATSCOPE_SHIM_ISR: no \"rx\" interrupt name and no known receive cause for this MAC"
#endif

static void (*orig_isr)(const void *arg);
static const void *orig_isr_arg;

static void isr_wrapper(const void *arg)
{
	ARG_UNUSED(arg);
	if (RX_CAUSE()) {
		app_mark(LS_POINT_RX_ISR);
	}
	orig_isr(orig_isr_arg);
}

static void wrap_isr(void)
{
	unsigned int irq = RX_IRQ;
	const struct _isr_table_entry *e = &_sw_isr_table[irq - CONFIG_GEN_IRQ_START_VECTOR];

	orig_isr = e->isr;
	orig_isr_arg = e->arg;
	irq_connect_dynamic(irq, RX_IRQ_PRIO, isr_wrapper, NULL, 0);
	driver_shim_isr_wrapped = true;
}

const char *driver_shim_rx_isr_where(void)
{
	return driver_shim_isr_wrapped ? RX_ISR_WHERE : "not-measured";
}
#else
const char *driver_shim_rx_isr_where(void)
{
	return "not-measured";
}
#endif

int driver_shim_install(void)
{
	struct net_if *iface = net_if_get_first_by_type(&NET_L2_GET_NAME(ETHERNET));

	if (iface == NULL) {
		return -ENODEV;
	}
#if defined(CONFIG_LATSCOPE_PATH_FAST)
	fast_track_init(iface);
#endif
	/* RX: our rule first, then accept everything else. TX: observe, then accept. */
	npf_append_recv_rule(&rx_rule);
	npf_append_recv_rule(&npf_default_ok);
	npf_append_send_rule(&tx_rule);
	npf_append_send_rule(&npf_default_ok);
#if defined(CONFIG_LATSCOPE_SHIM_ISR)
	wrap_isr();
#endif
	return 0;
}
