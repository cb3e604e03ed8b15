/* Unit tests of the marker table. SPDX-License-Identifier: BSD-2-Clause */
#include "latscope_core/markers.h"
#include "ls_test.h"

int main(void)
{
	struct ls_marker_map m;
	char buf[512];

	ls_marker_map_default(&m);
	/* The project-wide default table (docs/zephyr-app.md, "Markers"). */
	CHECK_EQ(m.channel_point[0], LS_POINT_RX_ISR);
	CHECK_EQ(m.channel_point[4], LS_POINT_TX_SEND);
	CHECK_EQ(ls_marker_channel(&m, LS_POINT_RX_FAST), 3);
	CHECK_EQ(ls_marker_channel(&m, LS_POINT_TX_XMIT), LS_MARKER_NONE);
	CHECK_EQ(ls_marker_channel(&m, (enum ls_point)77), LS_MARKER_NONE);

	CHECK_EQ(ls_marker_map_encode(&m, buf, sizeof(buf)), 52);
	CHECK_STR(buf, "m0=rx.isr,m1=rx.copy,m2=rx.udp,m3=rx.fast,m4=tx.send");
	/* snprintf semantics: truncated output, full length returned. */
	CHECK_EQ(ls_marker_map_encode(&m, buf, 10), 52);
	CHECK_STR(buf, "m0=rx.isr");
	CHECK_EQ(ls_marker_map_encode(&m, NULL, 0), 52);

	size_t n = ls_marker_map_format(&m, buf, sizeof(buf));

	CHECK_EQ(n, strlen(buf));
	CHECK(strstr(buf, "m0  rx.isr     m_isr     entry of the MAC's receive interrupt\n") == buf);
	CHECK(strstr(buf, "m4  tx.send    m_send    the application's send call starts\n") != NULL);

	/* Reassign: tx.xmit on m4, m2 unused. */
	const uint8_t pts[5] = {LS_POINT_RX_ISR, LS_POINT_RX_COPY, LS_MARKER_NONE, LS_POINT_RX_FAST,
				LS_POINT_TX_XMIT};

	CHECK_EQ(ls_marker_map_set(&m, pts), 0);
	CHECK_EQ(ls_marker_channel(&m, LS_POINT_TX_XMIT), 4);
	CHECK_EQ(ls_marker_channel(&m, LS_POINT_TX_SEND), LS_MARKER_NONE);
	CHECK_EQ(ls_marker_channel(&m, LS_POINT_RX_UDP), LS_MARKER_NONE);
	ls_marker_map_encode(&m, buf, sizeof(buf));
	CHECK_STR(buf, "m0=rx.isr,m1=rx.copy,m3=rx.fast,m4=tx.xmit");
	ls_marker_map_format(&m, buf, sizeof(buf));
	CHECK(strstr(buf, "m2  (unused)\n") != NULL);

	/* Rejections leave the map unchanged. */
	const uint8_t dup[5] = {0, 0, 0xff, 0xff, 0xff};
	const uint8_t bad[5] = {0, 1, 2, 3, LS_POINT_COUNT};

	CHECK_EQ(ls_marker_map_set(&m, dup), -1);
	CHECK_EQ(ls_marker_map_set(&m, bad), -1);
	CHECK_EQ(ls_marker_map_set(&m, NULL), -1);
	CHECK_EQ(ls_marker_channel(&m, LS_POINT_TX_XMIT), 4);

	CHECK_EQ(ls_point_lookup("rx.udp"), LS_POINT_RX_UDP);
	CHECK_EQ(ls_point_lookup("m_xmit"), LS_POINT_TX_XMIT);
	/* The TX driver-side points in firmware order (send -> queue -> hand-over -> MAC start). */
	CHECK_EQ(ls_point_lookup("tx.handoff"), LS_POINT_TX_HANDOFF);
	CHECK_EQ(ls_point_lookup("m_driver"), LS_POINT_TX_HANDOFF);
	const uint8_t tx_side[5] = {LS_POINT_TX_SEND, LS_POINT_TX_QUEUE, LS_POINT_TX_HANDOFF,
				    LS_POINT_TX_XMIT, LS_MARKER_NONE};

	CHECK_EQ(ls_marker_map_set(&m, tx_side), 0);
	ls_marker_map_encode(&m, buf, sizeof(buf));
	CHECK_STR(buf, "m0=tx.send,m1=tx.queue,m2=tx.handoff,m3=tx.xmit");
	ls_marker_map_format(&m, buf, sizeof(buf));
	CHECK(strstr(buf, "m2  tx.handoff m_driver  the L2 hands the frame to the driver's send\n") !=
	      NULL);
	CHECK_EQ(ls_point_lookup("rx"), -1);
	CHECK_EQ(ls_point_lookup(NULL), -1);
	TEST_DONE();
}
