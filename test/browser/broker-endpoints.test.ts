/**
 * Broker destinations on the Webhooks screen in a real browser, against
 * this machine's RabbitMQ and NATS JetStream: an amqp:// endpoint created
 * through the form (the form says which kind the URL names), each card
 * showing its kind from the URL's scheme (HTTPS, RabbitMQ, NATS JetStream)
 * and a hint without credentials, and a test event acknowledged by the
 * broker.
 */
import { jetstreamManager } from "@nats-io/jetstream"
import { connect as natsConnect } from "@nats-io/transport-node"
import { connect as amqpConnect } from "amqplib"
import { randomUUID } from "node:crypto"
import { afterAll, assert, beforeAll, it } from "vitest"
import { checkAccessibility, describeBrowser, screenshot, signIn, startWorld, until, type World } from "./support.ts"

let world: World
const routingKey = `svc.console.${randomUUID().slice(0, 8)}`
const subject = `svc.console.${randomUUID().slice(0, 8)}`
const stream = `svc_console_${randomUUID().slice(0, 8)}`
const received: Array<string> = []
let cleanup: () => Promise<void> = async () => undefined

beforeAll(async () => {
  world = await startWorld("broker-endpoints")
  // A queue bound to RabbitMQ's built-in topic exchange, and a stream for the subject.
  const rabbit = await amqpConnect("amqp://guest:guest@127.0.0.1:5672")
  const channel = await rabbit.createChannel()
  const { queue } = await channel.assertQueue("", { exclusive: true, autoDelete: true })
  await channel.bindQueue(queue, "amq.topic", routingKey)
  await channel.consume(queue, (message) => message !== null && received.push(message.content.toString("utf8")), {
    noAck: true
  })
  const nats = await natsConnect({ servers: "127.0.0.1:4222" })
  const manager = await jetstreamManager(nats)
  await manager.streams.add({ name: stream, subjects: [subject] })
  cleanup = async () => {
    await rabbit.close().catch(() => undefined)
    await manager.streams.delete(stream).catch(() => false)
    await nats.close()
  }
})
afterAll(async () => {
  await cleanup()
  await world?.close()
})

describeBrowser("Broker destinations", () => {
  it("a RabbitMQ endpoint created in the form, each endpoint's kind shown, and a test event the broker acknowledges", async () => {
    const receiver = await world.receiver()
    const https = await world.api("POST", "/v1/notification-endpoints", { url: receiver.url("/hooks/https") })
    assert.strictEqual(https.status, 201, JSON.stringify(https.body))
    const nats = await world.api("POST", "/v1/notification-endpoints", {
      url: `nats://127.0.0.1:4222?subject=${subject}`
    })
    assert.strictEqual(nats.status, 201, JSON.stringify(nats.body))

    const { page, done } = await world.open()
    await signIn(page, await world.link("admin", "Ada Admin"))
    await page.goto(`${world.baseUrl}/console/webhooks`)
    const url = page.getByRole("textbox", { name: "Destination URL" })
    await url.fill(`amqp://guest:guest@127.0.0.1:5672/?exchange=amq.topic&routing_key=${routingKey}`)
    await page.getByText("This one: RabbitMQ.").waitFor()
    await page.getByRole("button", { name: "Create endpoint" }).click()
    await page.getByRole("region", { name: "Signing secret of the new endpoint" }).waitFor()
    await page.getByRole("button", { name: "I have saved it" }).click()

    const card = (hint: string) => page.getByRole("listitem", { name: hint })
    const kindOf = async (hint: string) => {
      const facts = card(hint).locator("dl.facts").first()
      return (await facts.locator("div", { has: page.getByText("Kind", { exact: true }) }).locator("dd").textContent())!
    }
    const rabbitHint = "amqp://127.0.0.1:5672/…"
    await card(rabbitHint).waitFor()
    assert.strictEqual(await kindOf(rabbitHint), "RabbitMQ")
    assert.strictEqual(await kindOf(nats.body.endpoint.url_hint), "NATS JetStream")
    assert.strictEqual(await kindOf(https.body.endpoint.url_hint), "HTTPS")
    assert.notInclude(await page.content(), "guest:guest")
    await checkAccessibility(page, "webhooks with broker endpoints")

    await card(rabbitHint).getByRole("button", { name: "Send test event" }).click()
    await page.getByText(
      /Test event delivered to amqp:\/\/127\.0\.0\.1:5672\/…: the broker acknowledged it in \d+ ms\./
    ).waitFor()
    await until(async () => received.length === 1, "the test message in the queue")
    assert.strictEqual(JSON.parse(received[0]!).test, true)
    await screenshot(page, "webhooks-brokers")
    await done()
  })
})
