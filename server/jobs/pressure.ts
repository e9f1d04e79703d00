// Whether the instance is busy with interactive work (chat sends, requests) and running late: background queues
// (webhook deliveries) then take a trickle of jobs instead of their full concurrency, so a burst of chat does not
// slow down while its deliveries compete for the same core. The deliveries wait in the durable queue meanwhile
// and go out at full speed once the burst is over; nothing is dropped, only delayed.
import { monitorEventLoopDelay, type IntervalHistogram } from 'node:perf_hooks';

/** The event loop's p99 delay over a window above which the instance counts as running late. */
const LATE_MS = 20;
const WINDOW_MS = 250;
/**
 * Calm windows in a row before the pressure ends: one calm window inside a burst (a pause between two waves of
 * messages, a window the sampler saw little of) would otherwise flip the queues to full speed and back.
 */
const CALM_WINDOWS_TO_RELIEVE = 4;

export class ForegroundPressure {
  private histogram: IntervalHistogram | null = null;
  private timer: NodeJS.Timeout | null = null;
  private lastCount = 0;
  private pressed = false;
  private calmWindows = 0;

  /**
   * `foreground` counts interactive work done so far (messages sent, say); `onRelief` is called when the pressure
   * ends, so the background queues claim at once rather than at their next poll.
   */
  constructor(
    private readonly foreground: () => number,
    private readonly onRelief: () => void,
  ) {}

  get active(): boolean {
    return this.pressed;
  }

  start(): void {
    if (this.timer) return;
    this.histogram = monitorEventLoopDelay({ resolution: 10 });
    this.histogram.enable();
    this.lastCount = this.foreground();
    this.timer = setInterval(() => this.sample(), WINDOW_MS);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    this.histogram?.disable();
    this.histogram = null;
    this.pressed = false;
    this.calmWindows = 0;
  }

  private sample(): void {
    const histogram = this.histogram!;
    const count = this.foreground();
    // Late on its own says little (background work alone makes the loop late); late while serving users is pressure.
    const late = histogram.percentile(99) / 1e6 > LATE_MS && count !== this.lastCount;
    this.lastCount = count;
    histogram.reset();
    this.calmWindows = late ? 0 : this.calmWindows + 1;
    if (late) this.pressed = true;
    else if (this.pressed && this.calmWindows >= CALM_WINDOWS_TO_RELIEVE) {
      this.pressed = false;
      this.onRelief();
    }
  }
}
